// What the types promise, checked by `make ts-check`: each `@ts-expect-error` fails the build
// when the line below it stops being an error (docs/contracts-typescript.md, "Written and read
// shapes").
import {
  subjects,
  type ErrorBody,
  type McqConfig,
  type PollIdeaAction,
  type PollTallySubject,
  type ReviewCompleted,
  type ReviewRequest,
} from "@quiz/contracts";

// Written (validation schema): a field with a default may be left out.
export const minimalRequest: ReviewRequest = { questionId: "3f1c2a7e" };
export const minimalConfig: McqConfig = {
  configVersion: 2,
  prompt: "2 + 2?",
  choices: [{ text: "4", correct: true }, { text: "5" }],
};

// Read (serialization schema): every field is there, null when empty.
// @ts-expect-error poolId, versionId, requestId and pill are missing
export const partialEvent: ReviewCompleted = { questionId: "3f1c2a7e", review: null, error: null };

// Objects are closed: a misspelt field is refused.
// @ts-expect-error versionID is not a field (versionId is)
export const misspelt: ReviewRequest = { questionId: "3f1c2a7e", versionID: "9b0d" };

// An error reply leaves retry_after_s and details out when they are null (exclude_none).
export const refusal: ErrorBody = { code: "rate_limited", message: "slow down" };
// @ts-expect-error not one of the error codes
export const unknownCode: ErrorBody = { code: "no_such_code", message: "?" };

// A union body, discriminated by `action`.
export const merge: PollIdeaAction = { action: "merge", keys: ["bees"], into: "bee" };
// @ts-expect-error a merge needs `into`
export const mergeNowhere: PollIdeaAction = { action: "merge", keys: ["bees"] };

// The subjects, as literal types and as values.
export const requests: "review.v1.requests" = subjects.REVIEW_REQUESTS;
export const tally: PollTallySubject = "poll.v1.e42.tally";
// @ts-expect-error not a tally subject
export const notTally: PollTallySubject = "poll.v1.e42.frames";
