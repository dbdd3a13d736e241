// Package jinja is modeld's Jinja interpreter for chat templates: the
// subset of Jinja that model chat templates use, with the semantics that
// Python's jinja2 gives them under the settings Hugging Face's
// apply_chat_template uses (a sandbox that refuses mutation, trim_blocks,
// lstrip_blocks, no final newline, the loop controls, a tojson that keeps
// key order and writes json.dumps's separators, raise_exception and
// strftime_now).
//
// It owns lexing, parsing and rendering under a Budget (steps, output
// size, call depth), so a hostile template fails fast with ErrBudget
// instead of exhausting the process. Maps keep their insertion order
// (Map), and FromJSON decodes request JSON into them, so tojson writes a
// client's keys in the client's order.
//
// It must not know about models, tokenizers or HTTP: chat-specific
// variables (messages, tools, special tokens) are the caller's business
// (internal/chattmpl). It has no native dependencies.
//
// Why modeld has its own: on the 68 real templates of the test assets over
// the ten conversation shapes of internal/chattmpl's fidelity test (624
// renderings the reference renders as they are), the Go engines of the
// module proxy render identically to python3-jinja2 with transformers'
// settings in: github.com/ardanlabs/jinja v1.1.0 (modeld's renderer before,
// comments stripped first) 300, its v1.8.0 561 (newer ones need a newer
// Go), github.com/nikolalohinski/gonja/v2 v2.9.1 (trim and lstrip blocks
// on) 312; this package all 624. None of them has a render budget, so a
// template's range(1000000000) or a recursive macro runs until memory or
// the stack gives out.
package jinja
