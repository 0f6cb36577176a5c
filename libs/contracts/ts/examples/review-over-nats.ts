// A platform service asks for a review and reads what became of it, with nats.js and the
// types of @quiz/contracts. Type-checked by `make ts-check` (tsc --strict), not run: see
// docs/contracts-typescript.md for the set-up it assumes (the bus user `platform`).
import { connect, JSONCodec, type NatsConnection } from "nats";
import { subjects, type ErrorCode, type ReviewCompleted, type ReviewRequest } from "@quiz/contracts";

// Written: the validation shape, fields with defaults optional (versionId: the latest).
const requests = JSONCodec<ReviewRequest>();
// Read: the serialization shape, every field present (null when empty).
const completions = JSONCodec<ReviewCompleted>();

export async function requestReview(nc: NatsConnection, questionId: string, versionId: string) {
  const request: ReviewRequest = { questionId, versionId, requestId: `edit:${versionId}` };
  // A JetStream publish: the stream's ack says the request is stored; the Nats-Msg-Id makes a
  // retried publish one request (docs/review.md).
  const ack = await nc.jetstream().publish(subjects.REVIEW_REQUESTS, requests.encode(request), {
    msgID: `review-request:${versionId}`,
  });
  return ack.seq;
}

/** What a caller does with a completed event: the pill to show, or the error's code. */
export function outcome(event: ReviewCompleted): { pill: string } | { error: ErrorCode } {
  if (event.error !== null) return { error: event.error.code };
  const pill = event.pill;
  return { pill: pill === null ? "none" : `${pill.state}:${pill.count}` };
}

/** `servers`: NATS_URL; `password`: the `platform` user's (QUIZ_NATS_PASSWORD_PLATFORM). */
export async function main(servers: string, password: string): Promise<void> {
  // The platform's bus user reads its replies (and the stream's acks) under its own inbox.
  const nc = await connect({ servers, user: "platform", pass: password, inboxPrefix: "_INBOX_platform" });
  // The platform user may subscribe to review.v1.completed (core NATS sees every event the
  // stream stores); subscribe before publishing so the reply cannot be missed.
  const events = nc.subscribe(subjects.REVIEW_COMPLETED);
  await requestReview(nc, "3f1c2a7e-0000-4000-8000-000000000001", "9b0d1e4f-0000-4000-8000-00000000000a");
  for await (const msg of events) {
    const event = completions.decode(msg.data);
    if (event.requestId?.startsWith("edit:")) {
      console.log(event.questionId, outcome(event));
      break;
    }
  }
  await nc.drain();
}

/** What `review.v1.completed` carries after a review with one finding (tsc checks the shape). */
export const completedWithFindings: ReviewCompleted = {
  questionId: "3f1c2a7e-0000-4000-8000-000000000001",
  poolId: "5d2e9c10-0000-4000-8000-000000000002",
  versionId: "9b0d1e4f-0000-4000-8000-00000000000a",
  requestId: "edit:9b0d1e4f-0000-4000-8000-00000000000a",
  review: {
    versionNumber: 3,
    state: "findings",
    findings: [
      {
        severity: "notice",
        path: "choices.1.text",
        message: 'Spelling: "recieve" should be "receive".',
        fix: { from: "recieve", to: "receive" },
        applied: false,
      },
    ],
    reviewedAt: "2026-11-03T02:14:05Z",
  },
  pill: { state: "findings", count: 1, worst: "notice" },
  error: null,
};

/** And after a refusal: no review, an error (`retry_after_s` and `details` left out). */
export const completedRefused: ReviewCompleted = {
  questionId: "3f1c2a7e-0000-4000-8000-000000000001",
  poolId: null,
  versionId: null,
  requestId: null,
  review: null,
  pill: null,
  error: { code: "review_unsupported", message: "circuit questions are not reviewed" },
};
