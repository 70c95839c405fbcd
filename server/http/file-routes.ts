// The plain routes of attachments: a multipart upload and two binary downloads cannot be JSON
// procedures. They carry requests only: the caller and the checks come from the shared
// context and authorizeCaller, the rules from services/files.
import type { IncomingMessage, ServerResponse } from "node:http";
import { finished, pipeline } from "node:stream/promises";
import busboy from "busboy";
import { authorizeCaller } from "../authorize.ts";
import { createHttpContext } from "../context.ts";
import type { Deps } from "../deps.ts";
import { AppError, invalidField } from "../errors.ts";
import { isSafeText } from "../input-text.ts";
import { openAttachment, type AttachmentKind } from "../services/files/download.ts";
import { stageFile, unstageFile, uploadTooLarge } from "../services/files/stage-file.ts";
import { sendJson } from "./respond.ts";

type PlainRoute = (deps: Deps, req: IncomingMessage, res: ServerResponse) => Promise<void>;

export const FILE_FIELD = "file";
/** Room for the multipart framing, the part headers and small form fields beside the file. */
const MULTIPART_ALLOWANCE_BYTES = 64 * 1024;

const DOWNLOAD_PATHS: [RegExp, AttachmentKind][] = [
  [/^\/api\/v1\/message-attachments\/([^/]+)\/download$/, "channel"],
  [/^\/api\/v1\/direct-message-attachments\/([^/]+)\/download$/, "direct"],
];

/** An upload (POST /api/v1/files): its body has a limit of its own (MAX_UPLOAD_BYTES), not the JSON one. */
export function isUploadRequest(req: IncomingMessage): boolean {
  return req.method === "POST" && (req.url ?? "").split("?")[0] === "/api/v1/files";
}

/** The plain route for this request, if it is one of the attachment routes. */
export function fileRoute(method: string | undefined, pathname: string): PlainRoute | undefined {
  if (pathname === "/api/v1/files" && method === "POST") return uploadFile;
  if (method !== "GET") return undefined;
  for (const [pattern, kind] of DOWNLOAD_PATHS) {
    const id = pattern.exec(pathname)?.[1];
    if (id) return (deps, req, res) => downloadAttachment(deps, req, res, id, kind);
  }
  return undefined;
}

const fileRequired = () => invalidField(FILE_FIELD, "The file field is required.");

async function uploadFile(deps: Deps, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const auth = authorizeCaller(await createHttpContext(deps, req), { write: true });
  const limit = deps.config.maxUploadBytes;
  const requestLimit = limit + MULTIPART_ALLOWANCE_BYTES;
  if (Number(req.headers["content-length"] ?? 0) > requestLimit) {
    // Refused before a byte is read; closing the connection spares reading the rest.
    res.setHeader("Connection", "close");
    throw uploadTooLarge(limit);
  }
  // Laravel's answer to a request without a multipart body: the file is simply missing.
  if (req.headers["content-type"]?.split(";")[0]?.trim().toLowerCase() !== "multipart/form-data") {
    throw fileRequired();
  }

  let parser: busboy.Busboy;
  try {
    // Browsers send non-ASCII file names as raw UTF-8 in filename="…".
    parser = busboy({ headers: req.headers, defParamCharset: "utf8", limits: { fields: 20, parts: 30 } });
  } catch {
    throw new AppError("bad_request", "Malformed multipart body.");
  }

  let staged: ReturnType<typeof stageFile> | undefined;
  /** The staged part came without a file name (busboy reports filename="" as none). */
  let unnamed = false;
  parser.on("file", (name, file, info) => {
    // Only the first `file` part counts.
    if (name !== FILE_FIELD || staged) {
      file.resume();
      return;
    }
    unnamed = !info.filename;
    staged = stageFile(deps, auth.user.id, { content: file, filename: info.filename, mimeType: info.mimeType });
    // A refused upload leaves the rest of its part unread: read it away so the form can end.
    staged.catch(() => file.resume());
  });

  // A request without Content-Length (chunked) is bounded here instead: past the limit the
  // parse stops, the answer is 413 and the connection is closed.
  let received = 0;
  let overLimit = false;
  const countRequest = (chunk: Buffer) => {
    received += chunk.length;
    if (received > requestLimit && !overLimit) {
      overLimit = true;
      req.unpipe(parser);
      req.pause();
      parser.destroy(uploadTooLarge(limit));
    }
  };
  req.on("data", countRequest);
  // An aborted upload ends the parse, so the staging stops and discards what it stored.
  req.once("close", () => {
    if (!req.complete) parser.destroy(new AppError("bad_request", "The upload was aborted."));
  });
  req.pipe(parser);

  const parsed = await finished(parser).then(
    () => true,
    () => false,
  );
  req.off("data", countRequest);
  // Staging settles (and cleans up after itself) before any answer is given.
  const outcome =
    staged &&
    (await staged.then(
      (record) => ({ record }),
      (error: unknown) => ({ error }),
    ));
  if (overLimit) {
    res.setHeader("Connection", "close");
    throw uploadTooLarge(limit);
  }
  // A form that did not end well (cut short: "Unexpected end of form", or aborted) is a 400
  // whatever became of its file: a failed staging discarded its bytes itself, and a file that
  // was staged before the form broke off is removed again. Nothing of it stays.
  if (!parsed) {
    if (outcome && "record" in outcome) await unstageFile(deps, outcome.record.id);
    throw new AppError("bad_request", "Malformed multipart body.");
  }
  if (outcome && "error" in outcome) throw outcome.error;
  if (!outcome) throw fileRequired();
  // What a browser sends for a file input left empty: a part without a file name and without a
  // byte. No file was chosen (a nameless part with content is a file named "file").
  if (unnamed && outcome.record.size === 0) {
    await unstageFile(deps, outcome.record.id);
    throw fileRequired();
  }
  sendJson(res, 201, { data: outcome.record });
}

/** RFC 6266: a quoted ASCII fallback for old clients, and the exact name in UTF-8 (RFC 8187). */
export function contentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}

async function downloadAttachment(
  deps: Deps,
  req: IncomingMessage,
  res: ServerResponse,
  encodedId: string,
  kind: AttachmentKind,
): Promise<void> {
  const auth = authorizeCaller(await createHttpContext(deps, req), { write: false });
  // An id that does not decode, or decodes to text no id holds (NUL), names no attachment: 404.
  let attachmentId: string;
  try {
    attachmentId = decodeURIComponent(encodedId);
  } catch {
    attachmentId = "";
  }
  if (!isSafeText(attachmentId)) attachmentId = "";
  const download = await openAttachment(deps, auth.user.id, attachmentId, kind);
  res.writeHead(200, {
    "Content-Type": download.attachment.mimeType,
    "Content-Length": download.size,
    "Content-Disposition": contentDisposition(download.attachment.filename),
    // The type is the uploader's word: never let a browser sniff or render it as a page of ours.
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "private, no-cache",
  });
  await pipeline(download.body, res);
}
