// Compiles the bundle of scripts/gen_ts.py (JSON on stdin) into TypeScript declarations on
// stdout: json-schema-to-typescript on the root schema, every definition exported under its
// title (the Python class name). Run by `make ts`, never by hand: see
// docs/contracts-typescript.md.
import { compile } from "json-schema-to-typescript";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const bundle = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const ts = await compile(bundle.schema, bundle.schema.title, {
  bannerComment: "",
  // A model without `additionalProperties` (pydantic's extra="ignore") is closed here, so an
  // object literal with a misspelt field fails tsc instead of passing as an index signature.
  additionalProperties: false,
  declareExternallyReferenced: true,
  enableConstEnums: false,
  // Bounded arrays as arrays (their bounds stay in the doc comments), not unions of tuples.
  maxItems: -1,
  strictIndexSignatures: true,
  unknownAny: true,
  unreachableDefinitions: true,
  format: true,
  style: { printWidth: 100, singleQuote: false, trailingComma: "all" },
});
// json-schema-to-typescript notes on every definition that the root referenced it: true of
// each by construction (the root lists them all), so only noise here.
const referenced = / \*\n \* This interface was referenced by `[A-Za-z]+`'s JSON-Schema\n \* via the `definition` "[A-Za-z0-9_]+"\.\n/g;
process.stdout.write(ts.replace(referenced, "").replace(/\/\*\*\n \*\/\n/g, ""));
