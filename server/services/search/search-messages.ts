// Message search (docs/search.md, contract "Search"): every term of `q` must be found in the
// message's content, or every term in the caller's own stored translation of it, as a
// case-insensitive substring; newest first, in the places the caller may read now (the target
// policy's readablePlaces), never a deleted message.
//
// Two steps, each one statement over the search index:
// 1. The newest WINDOW rows of those places are checked with strpos: a common term fills the
//    page here, without the index's long lists of candidates.
// 2. Only when the page is not full: the index's keys give the candidates older than the window
//    (a rare term has few), and strpos confirms each.
import { and, inArray, isNull, sql, type SQL } from "drizzle-orm";
import { jsonOf, rowsOf } from "../../../db/client.ts";
import { arrayParam } from "../../../db/prepared.ts";
import { messages, messageSearch, type Language } from "../../../db/schema/index.ts";
import type { Deps } from "../../deps.ts";
import { notFound } from "../../errors.ts";
import {
  CHANNEL_NOT_FOUND,
  CONVERSATION_NOT_FOUND,
  readablePlaces,
  ROOM_NOT_FOUND,
  type PlaceFilter,
} from "../../policy/places.ts";
import { WORKSPACE_NOT_FOUND } from "../../policy/workspaces.ts";
import type { MessageRecord } from "../../records/message.ts";
import type { SearchHit, SearchPage } from "../../records/search.ts";
import { messagePage } from "../messaging/history.ts";
import { translationEnabled, userReaderLanguageSql } from "../translation/readers.ts";
import { CONTENT } from "./index-rows.ts";
import { queryKeys, queryTerms } from "./text.ts";

export const DEFAULT_SEARCH_PAGE = 20;
/** Rows of the newest messages checked directly before the index is asked (step 1). */
const WINDOW = 2_000;
/** With at least this many hits in the first window, a wider one is tried before the index. */
const WIDER_WINDOW_FROM = 4;
/** The widest window: 20,000 rows take about 30 ms. */
const MAX_WINDOW = 20_000;
/** Candidates taken beyond a page from the index, in place of messages deleted meanwhile. */
const SPARE_HITS = 10;

export type SearchRequest = PlaceFilter & {
  q: string;
  authorId?: number | undefined;
  limit?: number | undefined;
  before?: string | undefined;
};

type Place = { place_id: string; workspace_id: string | null; language: Language };
type Hit = { id: string; place_id: string; in_content: boolean };

type SearchDeps = Pick<Deps, "db" | "config" | "clock" | "jobOutbox">;

export async function searchMessages(deps: SearchDeps, userId: number, request: SearchRequest): Promise<SearchPage> {
  const limit = request.limit ?? DEFAULT_SEARCH_PAGE;
  const places = rowsOf<Place>(
    await deps.db.execute(sql`
      select p.place_id, p.workspace_id, ${userReaderLanguageSql(userId, sql`p.workspace_id`)} as language
      from (${readablePlaces(userId, request, deps.clock.now())}) p`),
  );
  if (places.length === 0) {
    const refused = filterNotFound(request);
    if (refused) throw refused;
    return { data: [], meta: { next_cursor: null } };
  }
  const terms = queryTerms(request.q);
  const where = candidateRows(places, translationEnabled(deps.config), request.authorId);
  const matches = sql.join(
    terms.map((term) => sql`strpos(s.lowered, ${term}) > 0`),
    sql` and `,
  );
  const wanted = limit + 1;
  const query: HitQuery = { where, matches, keys: queryKeys(terms), wanted };

  // Step 1: the newest rows, checked directly.
  const first = await windowHits(deps, query, { before: request.before, size: WINDOW });
  let hits = first.hits;
  let rest = first.rest;
  if (rest !== undefined && hits.length >= WIDER_WINDOW_FROM && hits.length < wanted) {
    // A term this frequent fills the page within a few more windows, sooner than the index's
    // many candidates would be read: one wider window, sized by the hits seen so far.
    const size = Math.min(
      MAX_WINDOW,
      Math.max(WINDOW, Math.ceil((1.5 * (wanted - hits.length) * WINDOW) / hits.length)),
    );
    const wider = await windowHits(deps, query, { upTo: rest, size });
    hits = [...hits, ...wider.hits];
    rest = wider.rest;
  }
  // Step 2: older candidates from the index.
  if (rest !== undefined && hits.length < wanted)
    hits = [...hits, ...(await indexHits(deps, query, { upTo: rest }, wanted - hits.length))];

  const shown = hits.slice(0, limit);
  return {
    data: await hitRecords(deps, userId, places, shown),
    meta: { next_cursor: hits.length > limit ? shown.at(-1)!.id : null },
  };
}

type HitQuery = { where: SQL; matches: SQL; keys: string[]; wanted: number };

/**
 * The hits among the newest `size` index rows before `before` (exclusive) or up to `upTo`
 * (inclusive), newest first, at most `wanted`, and `rest`: when the window was full, the id up to
 * which (inclusive) rows are still to be looked at. The window may have cut its oldest message's
 * rows in two, so that message is left to the next step, not answered here.
 */
async function windowHits(
  deps: SearchDeps,
  query: HitQuery,
  window: { before?: string | undefined; upTo?: string; size: number },
): Promise<{ hits: Hit[]; rest: string | undefined }> {
  const bound =
    window.upTo !== undefined
      ? sql`and s.message_id <= ${window.upTo}`
      : window.before !== undefined
        ? sql`and s.message_id < ${window.before}`
        : sql``;
  const [row] = rowsOf<{ scanned: number; reached: string | null; hits: unknown }>(
    await deps.db.execute(sql`
      with w as (
        select s.message_id, s.source, s.place_id, s.lowered from ${messageSearch} s
        where ${query.where} ${bound}
        order by s.message_id desc limit ${window.size}),
      hits as (
        select s.message_id as id, min(s.place_id) as place_id, bool_or(s.source = ${CONTENT}) as in_content
        from w s where ${query.matches} group by s.message_id)
      select (select count(*) from w)::integer as scanned, (select min(message_id) from w) as reached,
        coalesce((select json_agg(json_build_object('id', h.id, 'place_id', h.place_id, 'in_content', h.in_content)
            order by h.id desc)
          from (select h.id, h.place_id, h.in_content from hits h join ${messages} m on m.id = h.id and m.deleted_at is null
            order by h.id desc limit ${query.wanted}) h), '[]'::json) as hits`),
  );
  const hits = jsonOf<Hit[]>(row!.hits);
  if (row!.scanned < window.size) return { hits, rest: undefined };
  const reached = row!.reached!;
  return { hits: hits.filter((hit) => hit.id > reached), rest: reached };
}

/**
 * The newest `count` hits up to `bound` (a message id: inclusive, or exclusive with `below`), found
 * through the index's keys. The candidates are materialized first, so the planner reads them from
 * the GIN index (it cannot tell how few rows a key selects, and would otherwise walk the whole
 * table newest first hoping to meet `count` early); a few spare ones stand in for messages
 * deleted since they were indexed.
 */
async function indexHits(
  deps: SearchDeps,
  query: HitQuery,
  bound: { upTo: string } | { below: string },
  count: number,
): Promise<Hit[]> {
  const taken = count + SPARE_HITS;
  const rows = rowsOf<Hit & { gone: boolean }>(
    await deps.db.execute(sql`
      with candidates as materialized (
        select s.message_id, s.place_id, s.source from ${messageSearch} s
        where s.keys @> ${arrayParam(query.keys)}::text[] and ${query.where}
          and ${"upTo" in bound ? sql`s.message_id <= ${bound.upTo}` : sql`s.message_id < ${bound.below}`}
          and ${query.matches}),
      top as (
        select message_id as id, min(place_id) as place_id, bool_or(source = ${CONTENT}) as in_content
        from candidates group by message_id order by message_id desc limit ${taken})
      select t.id, t.place_id, t.in_content, m.id is null as gone
      from top t left join ${messages} m on m.id = t.id and m.deleted_at is null
      order by t.id desc`),
  );
  const hits = rows.filter((row) => !row.gone).map(({ id, place_id, in_content }) => ({ id, place_id, in_content }));
  if (hits.length >= count) return hits.slice(0, count);
  // More deleted messages among the newest candidates than spares: go on below the last one.
  if (rows.length < taken) return hits;
  return [...hits, ...(await indexHits(deps, query, { below: rows.at(-1)!.id }, count - hits.length))];
}

/** The 404 for a filter naming a place (or workspace) the caller cannot read, if one was given. */
function filterNotFound(filter: PlaceFilter) {
  if (filter.channelId !== undefined) return notFound(CHANNEL_NOT_FOUND);
  if (filter.conversationId !== undefined) return notFound(CONVERSATION_NOT_FOUND);
  if (filter.roomId !== undefined) return notFound(ROOM_NOT_FOUND);
  if (filter.workspaceId !== undefined) return notFound(WORKSPACE_NOT_FOUND);
  return undefined;
}

/**
 * The index rows a search may look at: the readable places' content, and the caller's own
 * translation in each place (their reading language there) when this server translates.
 */
function candidateRows(places: Place[], translating: boolean, authorId: number | undefined): SQL {
  const byLanguage = new Map<Language, string[]>();
  for (const place of places)
    byLanguage.set(place.language, [...(byLanguage.get(place.language) ?? []), place.place_id]);
  const inPlaces = sql`s.place_id = any(${arrayParam(places.map((place) => place.place_id))}::text[])`;
  const author = authorId === undefined ? sql`` : sql`and s.author_user_id = ${authorId}`;
  if (!translating) return sql`${inPlaces} and s.source = ${CONTENT} ${author}`;
  const sources =
    byLanguage.size === 1
      ? sql`s.source in (${CONTENT}, ${[...byLanguage.keys()][0]!})`
      : sql`(s.source = ${CONTENT} or ${sql.join(
          [...byLanguage].map(
            ([language, ids]) => sql`(s.source = ${language} and s.place_id = any(${arrayParam(ids)}::text[]))`,
          ),
          sql` or `,
        )})`;
  return sql`${inPlaces} and ${sources} ${author}`;
}

/** The hits as message records, each in its reader's view (its place's language), newest first. */
async function hitRecords(deps: SearchDeps, userId: number, places: Place[], hits: Hit[]): Promise<SearchHit[]> {
  if (hits.length === 0) return [];
  // The places' rows already hold the caller's language in each workspace.
  const placeOf = new Map(places.map((place) => [place.place_id, place]));
  const byWorkspace = new Map<string | null, { language: Language; ids: string[] }>();
  for (const hit of hits) {
    const place = placeOf.get(hit.place_id)!;
    const group = byWorkspace.get(place.workspace_id);
    if (group) group.ids.push(hit.id);
    else byWorkspace.set(place.workspace_id, { language: place.language, ids: [hit.id] });
  }
  const records = new Map<string, MessageRecord>();
  for (const [workspaceId, { language, ids }] of byWorkspace) {
    const page = await messagePage(
      deps,
      { userId, workspaceId, language },
      and(inArray(messages.id, ids), isNull(messages.deletedAt))!,
      { limit: ids.length },
    );
    for (const record of page.data) records.set(record.id, record);
  }
  return hits.flatMap((hit) => {
    const record = records.get(hit.id);
    return record ? [{ ...record, matched_in: hit.in_content ? ("content" as const) : ("translation" as const) }] : [];
  });
}
