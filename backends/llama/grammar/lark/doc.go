// Package lark translates a Lark grammar (the grammar syntax of custom,
// freeform tools in the OpenAI Responses API) into GBNF, the grammar format
// of llama.cpp's sampler, so that a freeform tool call sampled under the
// GBNF is text the Lark grammar accepts. Regex translates a single regular
// expression the same way (a custom tool's "regex" syntax).
//
// Grammar.Match reads a text as Lark's Earley parser does, from the
// regexes' source text, so that tests can check sampled text independently
// of the translation.
//
// It owns the translation only: it reads grammar text and writes grammar
// text. It must not build samplers, read requests or know a tool-call
// syntax; the llama backend (toolgrammar.go) places the result inside a
// call's arguments.
//
// # Supported Lark
//
//   - Rules (lowercase, with the ?, ! and _ prefixes) and terminals
//     (uppercase), their alternatives (| on the same or the next lines),
//     sequences, groups (...) and optional groups [...], the operators ?, *,
//   - and ~ n / ~ n..m, aliases (-> name, ignored: they name tree nodes).
//   - String literals with Python's escapes and the i flag (ASCII letters
//     match either case), literal ranges "a".."z".
//   - Regular expressions /.../ with the flags i, s, m and u, in this
//     subset of Python's syntax: literals and escapes, classes ([a-z],
//     [^...], \d \w \s and their negations), ".", the greedy quantifiers
//     ? * + {m} {m,} {,n} {m,n}, groups ((...), (?:...), (?P<name>...)) and
//     alternation. Anchors, lookaround, backreferences, inline flags, lazy
//     and possessive quantifiers and the x flag are refused, each naming
//     the construct (*UnsupportedError).
//   - Priorities (rule.2, TERM.2) are accepted and ignored: they choose
//     between parses of the same text, they do not change which texts parse.
//   - %import common.NAME (also "-> alias" and the list form) for Lark's
//     common terminals (LF, CR, NEWLINE, WS, WS_INLINE, DIGIT, INT, NUMBER,
//     WORD, CNAME, ESCAPED_STRING, ...). Other modules, %declare, %override,
//     %extend and rule templates are refused.
//   - %ignore is accepted and produces nothing: the ignored terminals may
//     stand between any two tokens of a parse, and text without them parses
//     too, so the sampler writes none.
//
// # Soundness
//
// Every text the GBNF produces parses under the Lark grammar, with two
// narrowings where the sampler cannot follow Python exactly: \d, \w and \s
// produce their ASCII members only (and inside a negated class stand for
// everything outside ASCII too), and the i flag folds ASCII letters only.
// llama.cpp explores every way a regex terminal can match, while Lark's
// Earley dynamic lexer matches each regex terminal greedily: the two agree
// whenever a terminal's match cannot run on into what follows it (a line
// terminal /.+/ followed by its newline, as patch grammars have it); a
// grammar that relies on a terminal stopping short of a longer match may
// produce text Lark does not read the same way. Left recursion, which
// llama.cpp's sampler cannot run, is an *UnsupportedError naming the rule.
//
// # JSON strings
//
// With Options.JSONString every sentence is written as the body of a JSON
// string (no quotes): the characters JSON must escape appear as their
// escapes (\" \\ \n \t \r \b \f \u00XX), everything else as itself, so a
// tool call carrying the text as a JSON string value is sampled directly.
package lark
