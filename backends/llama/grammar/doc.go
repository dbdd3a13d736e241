// Package grammar turns a JSON Schema into a GBNF grammar, the grammar format
// of llama.cpp's grammar sampler, so that constrained generation can only
// produce JSON the schema accepts. ToolCall builds one grammar from several
// tools' parameters schemas: a call object {"name", "arguments"} of any of
// them, each tool's rules its own, its parts (each tool's name and
// arguments, the object's keys) named rules, so that the llama backend can
// write a template family's call syntax around them.
//
// It owns the translation only: it does not load models, build samplers or
// read requests. The api turns its *UnsupportedError into a 400 that names
// the keyword; the llama backend hands the grammar text to the sampler.
//
// # Supported subset
//
//   - type (a name or an array of names): object, array, string, number,
//     integer, boolean, null.
//   - Objects: properties, required, additionalProperties (false, true or a
//     schema), and propertyNames when it accepts every string (true, {} or
//     {"type": "string"}: object keys are strings anyway). Without additionalProperties only the declared properties are
//     produced (a subset of what the schema accepts). Required properties come
//     first, in declaration order, then the optional ones in declaration order.
//   - Arrays: items, prefixItems, minItems, maxItems (also the draft-07
//     tuple form, items as an array with additionalItems). Every prefix item
//     is produced (up to maxItems); further items only when items allows.
//   - enum, const (any JSON value, emitted in its compact form).
//   - $ref to "#", "#/$defs/..." and "#/definitions/..." (recursion allowed
//     when it passes through an object or array; a reference that reaches
//     itself without consuming any text is an error).
//   - anyOf; oneOf when its branches are provably exclusive (types that do
//     not overlap, const/enum values that differ, or a property both require
//     with differing const/enum values: a discriminated union), otherwise an
//     *UnsupportedError; allOf (members merged: properties, required, types
//     intersected; other keywords must agree). Sibling keywords beside anyOf,
//     oneOf or $ref are merged into each branch.
//   - Strings: minLength, maxLength, pattern, format (date, time,
//     date-time, uuid, email, hostname, ipv4, uri: each a conservative subset
//     of its syntax, e.g. uri is an http(s) URL).
//   - Integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum, through
//     digit-range rules; format int32 (bounded to its range) and int64.
//     Numbers: the same bounds when they are whole numbers and the minimum is
//     zero or more (no exponent is produced then); format float and double.
//   - nullable: true (the OpenAPI spelling of "or null").
//
// Patterns are a subset of ECMA-262 regular expressions: literals and
// escapes, classes ([a-z], [^...], \d \w \s and their negations), ".", the
// quantifiers ? * + {m} {m,} {m,n}, groups ((...) and (?:...)), alternation,
// and the anchors ^ and $ at the ends only. An unanchored end matches any
// text on that side. A top-level alternation anchored at both ends
// (^a|b$, which reads (^a)|(b$)) is produced as ^(a|b)$, a narrower
// language; anchored at one end only it is an error. Lookaround, backreferences and lazy quantifiers are
// errors. Characters JSON must escape are never produced from a class or ".".
//
// Anything else that constrains a value (not, if/then/else, multipleOf,
// uniqueItems, patternProperties, dependentRequired, ...) is an
// *UnsupportedError naming the keyword; it is never silently dropped.
// Descriptive keywords (title, description, examples, default, $schema, $id,
// $comment, deprecated, readOnly, writeOnly, ...) are accepted and ignored.
//
// # Bounds
//
// Whitespace between tokens is bounded (one space, or a newline and at most
// 20 spaces or tabs), so a model cannot loop on blanks. Nesting depth, rule
// count, visits, repetition counts and grammar size are capped (Limits); a
// schema past a cap is a *LimitError, never a hang. llama.cpp's parser
// refuses a repetition whose count, times the counts nested inside it,
// reaches 2000: a maximum (maxLength, maxItems, a pattern count) past that
// is lowered to fit, which only narrows the output; a minimum past it is a
// *LimitError. A recursive schema with no finite instance (a required
// property referring to its own object) gives a grammar that never ends:
// generation stops at the request's token limit.
package grammar
