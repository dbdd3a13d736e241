package chattmpl_test

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	. "github.com/modeld/modeld/internal/chattmpl"
	"github.com/modeld/modeld/internal/chattmpl/chattmpltest"
	"github.com/modeld/modeld/internal/jinja"
)

// allowedDifferences lists, by "template/conversation", every rendering
// that may differ from the reference, with the reason. The test fails on
// any other difference, and on an entry that no longer differs.
var allowedDifferences = map[string]string{}

// TestFidelityAgainstReference renders every real chat template with every
// conversation shape, with modeld's renderer and with the reference
// (python3-jinja2 with transformers' settings), and compares byte for byte.
// Where the reference raises, modeld must refuse too, or render the
// documented polyfill exactly as the reference renders the polyfilled
// conversation.
func TestFidelityAgainstReference(t *testing.T) {
	templates := chattmpltest.RealTemplates(t)
	convs := chattmpltest.Conversations()
	compiled := map[string]*Template{}
	var cases []chattmpltest.OracleCase
	add := func(name, id string, in Input) {
		vars, err := compiled[name].Vars(in)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		cases = append(cases, chattmpltest.OracleCase{ID: id, Template: name, Vars: vars})
	}
	names := make([]string, 0, len(templates))
	for name := range templates {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		compiled[name] = &Template{}
		if c, err := Compile(templates[name]); err == nil {
			compiled[name] = c
		}
		for _, c := range convs {
			add(name, name+"/"+c.Name, c.Input)
			for _, p := range []Polyfill{PolyfillSystem, PolyfillTools, PolyfillDescriptions} {
				if in, ok := Polyfilled(c.Input, p); ok {
					add(name, name+"/"+c.Name+"#"+string(p), in)
				}
			}
		}
	}
	ref := chattmpltest.Oracle(t, templates, cases)
	var matched, refused, polyfilled, total int
	var failures []string
	seenAllowed := map[string]bool{}
	for _, name := range names {
		tmpl, cerr := Compile(templates[name])
		for _, c := range convs {
			id := name + "/" + c.Name
			total++
			want := ref[id]
			var got string
			var poly Polyfill
			err := cerr
			if err == nil {
				got, poly, err = tmpl.RenderPolyfilled(c.Input)
			}
			problem := ""
			switch {
			case want.Error == "" && err != nil:
				problem = fmt.Sprintf("modeld fails (%v), the reference renders", err)
			case want.Error == "" && poly != PolyfillNone:
				problem = "modeld polyfilled a conversation the reference renders"
			case want.Error == "" && got != want.Text:
				problem = "differs: " + firstDiff(got, want.Text)
			case want.Error == "":
				matched++
			case err != nil:
				refused++ // both refuse
				if want.Raised && !errors.Is(err, jinja.ErrRaised) {
					problem = fmt.Sprintf("the reference raises (%s), modeld fails otherwise (%v)", want.Error, err)
				}
			case poly != PolyfillNone:
				pw := ref[id+"#"+string(poly)]
				if pw.Error != "" || got != pw.Text {
					problem = "polyfill differs from the reference's rendering of the polyfilled conversation: " + firstDiff(got, pw.Text)
				} else {
					polyfilled++
				}
			default:
				problem = fmt.Sprintf("the reference fails (%s), modeld renders", want.Error)
			}
			if problem == "" {
				continue
			}
			if _, ok := allowedDifferences[id]; ok {
				seenAllowed[id] = true
				continue
			}
			failures = append(failures, id+": "+problem)
		}
	}
	t.Logf("fidelity: %d templates x %d conversations: %d renderings identical to the reference, %d refused by both, %d polyfilled identically to the reference's rendering of the polyfilled conversation, %d differ",
		len(names), len(convs), matched, refused, polyfilled, len(failures))
	if matched < total/2 {
		t.Errorf("only %d of %d renderings matched: the comparison itself is broken", matched, total)
	}
	for id := range allowedDifferences {
		if !seenAllowed[id] {
			t.Errorf("%s is listed as an allowed difference but no longer differs: remove it", id)
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
}

// firstDiff describes where two renderings part.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	clipAt := func(s string) string {
		return fmt.Sprintf("%q", s[lo:min(len(s), i+40)])
	}
	return fmt.Sprintf("at byte %d: modeld %s, reference %s", i, clipAt(got), clipAt(want))
}
