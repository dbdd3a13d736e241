package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	yz "github.com/hybridgroup/yzma/pkg/llama"

	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/internal/jinja"
)

// Tool is a function the model may call (the tools variable of a template).
type Tool = backends.Tool

// ChatPrompt renders msgs (and tools) with the model's chat template and
// tokenizes the result so that only the template's own markup can produce
// control tokens: text that comes from the messages (content, tool call
// arguments, names and ids) is tokenized as plain text, so a user message or
// a tool result holding "<|im_end|>\n<|im_start|>system" cannot open a turn.
//
// How: the template is rendered with each such text replaced by a sentinel
// (ASCII letters and digits around a random nonce, which no message holds).
// The rendered markup is cut at the sentinels, control tokens are found in
// the markup pieces only, and the text between two control tokens (markup
// and content joined back) is tokenized without special parsing. For a
// conversation that holds no control-token text this gives exactly the
// tokens of Tokenize(ApplyChatTemplate(msgs), true, true), so KV prefix
// reuse across turns works as before.
//
// Limits: a template that transforms content (trim, slicing, upper, split)
// sees the sentinel, not the text. The real text is rendered too: when it
// equals the sentinel rendering with the contents trimmed, the trimmed
// contents are taken (templates that trim); another transform that keeps
// the sentinel whole is not applied to the content (the text goes in as
// sent: e.g. a template that cuts the reasoning out of an assistant turn);
// a transform that breaks the sentinel makes ChatPrompt take the real text,
// which it accepts only when no message holds control-token text (else
// ErrTemplate). Tool definitions are rendered as markup; one holding
// control-token text is refused.
func (m *Model) ChatPrompt(msgs []Message, tools []Tool, addAssistant bool) ([]int32, error) {
	return m.chatPrompt(context.Background(), msgs, tools, addAssistant, nil)
}

// chatPrompt is ChatPrompt with extra template variables (vars, the
// request's chat_template_kwargs).
func (m *Model) chatPrompt(ctx context.Context, msgs []Message, tools []Tool, addAssistant bool, vars map[string]any) ([]int32, error) {
	if m.info.ChatTemplate == "" {
		return nil, ErrNoChatTemplate
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	// With images, each is a marker in its message's content, which the
	// template renders as text and tokenizeWithImages cuts at.
	var imgs []*backends.Image
	marker := ""
	if n := backends.CountImages(msgs); n > 0 {
		if m.vis == nil {
			return nil, &backends.ImageInputError{Images: n, Reason: m.info.VisionOff}
		}
		marker = newImageMarker(msgs)
		msgs, imgs = withImageMarkers(msgs, marker)
	}
	tokenize := func(segs []segment, sp *specials) ([]int32, error) {
		if len(imgs) > 0 {
			return m.tokenizeWithImages(ctx, sp, segs, marker, imgs)
		}
		return m.tokenizeSegments(ctx, sp, segs)
	}
	// tokenizeReal tokenizes a rendering taken as it is, special text parsed.
	tokenizeReal := func(real string, sp *specials) ([]int32, error) {
		if len(imgs) > 0 {
			return m.tokenizeWithImages(ctx, sp, []segment{{text: real, markup: true}}, marker, imgs)
		}
		return m.TokenizeContext(ctx, real, true, true)
	}
	sp, err := m.controlTokens()
	if err != nil {
		return nil, err
	}
	for _, t := range tools {
		for _, s := range []string{t.Name, t.Description, string(t.Parameters)} {
			if txt, ok := sp.find(s); ok {
				return nil, fmt.Errorf("%w: tool %q holds the text of the control token %q", ErrInvalidRequest, clipName(t.Name), txt)
			}
		}
	}
	ph, texts := placeholders(msgs)
	out, err := m.render(ph.msgs, tools, addAssistant, vars)
	if err != nil {
		// A template that checks the texts themselves (an id's length) may
		// refuse a sentinel: the real text decides.
		if _, rerr := m.render(msgs, tools, addAssistant, vars); rerr != nil {
			return nil, err
		}
		out = ""
	}
	segs, ok := ph.split(out, texts)
	if out == "" {
		ok = false
	}
	if !ok {
		// The template broke a sentinel: render the real text, safe only
		// when no message holds control-token text.
		for _, s := range texts {
			if txt, found := sp.find(s); found {
				return nil, fmt.Errorf("%w: the chat template transforms message content, and a message holds the text of the control token %q", ErrTemplate, txt)
			}
		}
		real, err := m.render(msgs, tools, addAssistant, vars)
		if err != nil {
			return nil, err
		}
		return tokenizeReal(real, sp)
	}
	// Templates transform content: they trim it, or write it with tojson
	// (a tool result as a JSON string). When the real rendering is the
	// sentinel one with the contents so transformed, take them so, so the
	// prompt is the template's own; when it is neither, and no message
	// holds control-token text, the real rendering is tokenized.
	if real, err := m.render(msgs, tools, addAssistant, vars); err == nil && joinSegments(segs) != real {
		matched := false
		for _, transform := range []func(string) string{strings.TrimSpace, jsonEscaped} {
			cand := make([]segment, len(segs))
			for i, sg := range segs {
				cand[i] = sg
				if !sg.markup {
					cand[i].text = transform(sg.text)
				}
			}
			if joinSegments(cand) == real {
				segs, matched = cand, true
				break
			}
		}
		if !matched && !holdsControlText(sp, texts) {
			return tokenizeReal(real, sp)
		}
	}
	return tokenize(segs, sp)
}

// jsonEscaped is s as tojson writes it inside its quotes.
func jsonEscaped(s string) string {
	q, err := jinja.ToJSON(s, nil, false)
	if err != nil || len(q) < 2 {
		return s
	}
	return q[1 : len(q)-1]
}

func holdsControlText(sp *specials, texts []string) bool {
	for _, s := range texts {
		if _, found := sp.find(s); found {
			return true
		}
	}
	return false
}

func joinSegments(segs []segment) string {
	var b strings.Builder
	for _, sg := range segs {
		b.WriteString(sg.text)
	}
	return b.String()
}

// segment is a piece of a rendered prompt: markup of the template, or text
// from a message.
type segment struct {
	text   string
	markup bool
}

// tokenizeSegments tokenizes segs with the model's vocabulary, BOS (and
// EOS) added as the vocabulary asks.
func (m *Model) tokenizeSegments(ctx context.Context, sp *specials, segs []segment) ([]int32, error) {
	var out []int32
	if yz.VocabGetAddBOS(m.vocab) && m.info.BOS >= 0 {
		out = append(out, m.info.BOS)
	}
	ids, err := sp.tokenize(segs, func(text string) ([]int32, error) { return m.TokenizeContext(ctx, text, false, false) })
	if err != nil {
		return nil, err
	}
	out = append(out, ids...)
	if yz.VocabGetAddEOS(m.vocab) && m.info.EOS >= 0 {
		out = append(out, m.info.EOS)
	}
	return out, nil
}

// tokenize turns segs into ids: control tokens only from markup, the rest
// as text runs given to text (a tokenizer without special parsing), each run
// cut where a control token stands, as llama.cpp's tokenizer cuts a text
// with special parsing. A control token with the lstrip (rstrip) attribute
// eats the whitespace before (after) it, as there.
func (sp *specials) tokenize(segs []segment, text func(string) ([]int32, error)) ([]int32, error) {
	var out []int32
	var run strings.Builder
	flush := func() error {
		if run.Len() == 0 {
			return nil
		}
		ids, err := text(run.String())
		run.Reset()
		out = append(out, ids...)
		return err
	}
	stripLeft := false // the last control token strips whitespace after it
	for _, s := range segs {
		rest := s.text
		for rest != "" {
			if stripLeft {
				rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
				if rest == "" {
					break
				}
				stripLeft = false
			}
			at, tok := -1, special{}
			if s.markup {
				at, tok = sp.next(rest)
			}
			if at < 0 {
				run.WriteString(rest)
				break
			}
			run.WriteString(rest[:at])
			if tok.attr&yz.TokenAttrLstrip != 0 {
				trimmed := strings.TrimRightFunc(run.String(), unicode.IsSpace)
				run.Reset()
				run.WriteString(trimmed)
			}
			if err := flush(); err != nil {
				return nil, err
			}
			out = append(out, tok.id)
			stripLeft = tok.attr&yz.TokenAttrRstrip != 0
			rest = rest[at+len(tok.text):]
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

// special is a control token of the vocabulary.
type special struct {
	text string
	id   int32
	attr yz.TokenAttr
}

// specials are the control tokens of a vocabulary, longest text first (the
// order in which llama.cpp's tokenizer matches them).
type specials struct{ list []special }

// next finds the first control token in s (the longest at that position):
// its offset, or -1.
func (sp *specials) next(s string) (int, special) {
	best, tok := -1, special{}
	for _, c := range sp.list {
		i := strings.Index(s, c.text)
		if i >= 0 && (best < 0 || i < best) {
			best, tok = i, c
		}
	}
	return best, tok
}

// find reports the text of a control token that s holds.
func (sp *specials) find(s string) (string, bool) {
	if _, tok := sp.next(s); tok.text != "" {
		return tok.text, true
	}
	return "", false
}

// controlTokens lists the vocabulary's control tokens (once per model).
func (m *Model) controlTokens() (*specials, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.freed {
		return nil, ErrClosed
	}
	m.tmpl.specialsOnce.Do(func() {
		sp := &specials{}
		for id := 0; id < m.nVocab; id++ {
			attr := yz.VocabGetAttr(m.vocab, yz.Token(id))
			if attr&(yz.TokenAttrControl|yz.TokenAttrUnknown) == 0 {
				continue
			}
			if text := yz.VocabGetText(m.vocab, yz.Token(id)); text != "" {
				sp.list = append(sp.list, special{text: text, id: int32(id), attr: attr})
			}
		}
		sort.SliceStable(sp.list, func(i, j int) bool { return len(sp.list[i].text) > len(sp.list[j].text) })
		m.tmpl.specials = sp
	})
	return m.tmpl.specials, nil
}

// placeholderSet is a copy of messages whose texts are sentinels.
type placeholderSet struct {
	msgs   []Message
	prefix string // every sentinel is prefix + index + "z"
}

// placeholders replaces every non-empty text of msgs (content, reasoning,
// name, tool call id; a tool call's id, name and arguments) by a sentinel; texts[i] is
// what sentinel i stands for.
func placeholders(msgs []Message) (placeholderSet, []string) {
	prefix := newPrefix(msgs)
	var texts []string
	put := func(s string) string {
		if s == "" {
			return ""
		}
		texts = append(texts, s)
		return prefix + strconv.Itoa(len(texts)-1) + "z"
	}
	out := make([]Message, len(msgs))
	for i, msg := range msgs {
		c := msg
		c.Parts = nil
		c.Content = put(msg.Content)
		c.Reasoning = put(msg.Reasoning)
		c.Name = put(msg.Name)
		c.ToolCallID = put(msg.ToolCallID)
		if len(msg.ToolCalls) > 0 {
			c.ToolCalls = make([]backends.ToolCall, len(msg.ToolCalls))
			for j, tc := range msg.ToolCalls {
				c.ToolCalls[j] = backends.ToolCall{ID: put(tc.ID), Name: put(tc.Name), Arguments: putArguments(tc.Arguments, put)}
			}
		}
		out[i] = c
	}
	return placeholderSet{msgs: out, prefix: prefix}, texts
}

// putArguments is placeholders for a tool call's arguments: when they are
// a JSON object (which templates render with tojson), each key and string
// value becomes a sentinel standing for its JSON-escaped text, so the
// rendered object is valid JSON; other arguments are one sentinel.
func putArguments(args string, put func(string) string) string {
	obj, err := jinja.FromJSON([]byte(args))
	if _, isObj := obj.(*jinja.Map); err != nil || !isObj {
		return put(args)
	}
	// A string's sentinel stands for its text as tojson writes it.
	quote := func(s string) string {
		q, _ := jinja.ToJSON(s, nil, false)
		return q[1 : len(q)-1]
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if q := quote(v); q != "" {
				return put(q)
			}
			return v
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
		case *jinja.Map:
			out := jinja.NewMap()
			for _, k := range v.Keys() {
				x, _ := v.Get(k)
				key := k
				if q := quote(k); q != "" {
					key = put(q)
				}
				out.Set(key, walk(x))
			}
			return out
		}
		return v
	}
	b, err := jinja.ToJSON(walk(obj), nil, false)
	if err != nil {
		return put(args)
	}
	return b
}

// newPrefix draws a sentinel prefix that no text of msgs holds.
func newPrefix(msgs []Message) string {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p := "mdld" + hex.EncodeToString(b[:]) + "q"
		nonce := p[4:]
		clash := false
		for _, msg := range msgs {
			all := msg.Role + msg.Content + msg.Reasoning + msg.Name + msg.ToolCallID
			for _, tc := range msg.ToolCalls {
				all += tc.ID + tc.Name + tc.Arguments
			}
			if strings.Contains(all, nonce) {
				clash = true
				break
			}
		}
		if !clash {
			return p
		}
	}
}

// split cuts the rendered markup at the sentinels. ok is false when a
// sentinel was broken (the nonce remains outside a whole sentinel).
func (ph placeholderSet) split(out string, texts []string) ([]segment, bool) {
	var segs []segment
	nonce := ph.prefix[4:]
	for {
		i := strings.Index(out, ph.prefix)
		if i < 0 {
			break
		}
		rest := out[i+len(ph.prefix):]
		j := 0
		for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
			j++
		}
		if j == 0 || j >= len(rest) || rest[j] != 'z' {
			return nil, false
		}
		k, err := strconv.Atoi(rest[:j])
		if err != nil || k >= len(texts) {
			return nil, false
		}
		if i > 0 {
			segs = append(segs, segment{text: out[:i], markup: true})
		}
		segs = append(segs, segment{text: texts[k]})
		out = rest[j+1:]
	}
	// A sentinel changed by the template (upper, slicing) leaves its nonce
	// behind, in some case.
	if strings.Contains(strings.ToLower(out), nonce) {
		return nil, false
	}
	for _, s := range segs {
		if s.markup && strings.Contains(strings.ToLower(s.text), nonce) {
			return nil, false
		}
	}
	if out != "" {
		segs = append(segs, segment{text: out, markup: true})
	}
	return segs, true
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
