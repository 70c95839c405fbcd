// Push devices (API document, "Devices"): the phones and browsers that get a notification for
// the messages meant for their user (docs/push.md).
import { z } from "zod";
import { notFound } from "../server/errors.ts";
import { dataOf } from "../server/records/common.ts";
import { pushDeviceRecord, toPushDeviceRecord } from "../server/records/push-device.ts";
import { deleteDevice, registerDevice } from "../server/services/push/devices.ts";
import { PUSH_PLATFORMS, PUSH_PROVIDERS } from "../server/services/push/provider.ts";
import { authedProcedure, router } from "../server/trpc.ts";

const tags = ["Devices"];

export const devicesRouter = router({
  register: authedProcedure
    .meta({
      successStatus: 201,
      openapi: {
        method: "POST",
        path: "/api/v1/devices",
        tags,
        summary: "Register a push device",
        description:
          "Idempotent, safe to call on every app launch: a push_token already known, even from another account, " +
          "answers the same device (last_used_at refreshed) and moves it to the caller. The token is never returned.",
      },
    })
    .input(
      z.object({
        platform: z.enum(PUSH_PLATFORMS),
        provider: z.enum(PUSH_PROVIDERS),
        // Trimmed first, as Laravel's TrimStrings does: only spaces is a missing token.
        push_token: z.string().trim().min(1).max(4096),
        device_id: z.string().max(255).optional(),
        device_name: z.string().max(255).optional(),
        app_version: z.string().max(255).optional(),
      }),
    )
    .output(dataOf(pushDeviceRecord))
    .mutation(async ({ ctx, input }) => {
      const device = await registerDevice(ctx.deps, ctx.auth.user.id, {
        platform: input.platform,
        provider: input.provider,
        pushToken: input.push_token,
        deviceId: input.device_id,
        deviceName: input.device_name,
        appVersion: input.app_version,
      });
      return { data: toPushDeviceRecord(device) };
    }),

  delete: authedProcedure
    .meta({
      successStatus: 204,
      openapi: {
        method: "DELETE",
        path: "/api/v1/devices/{id}",
        tags,
        summary: "Remove a push device",
        description: "Only the owner may delete; anyone else, and a second delete, get 404.",
      },
    })
    .input(z.object({ id: z.string() }))
    .output(z.void())
    .mutation(async ({ ctx, input }) => {
      if (!(await deleteDevice(ctx.deps, ctx.auth.user.id, input.id))) throw notFound("Device not found.");
    }),
});
