package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestUnknownModelsAddNoSeries: a stranger naming 2,000 different models
// that do not exist must not grow the scrape by a series each; they count
// under one model="" series, while a stored model that fails to load keeps
// its own.
func TestUnknownModelsAddNoSeries(t *testing.T) {
	l := newFakeLoader()
	l.fail = func(id string, _ int) error {
		if id == "broken" {
			return errors.New("bad file")
		}
		return nil
	}
	c := newTestCache(t, testConfig(), specs{"chat": {Task: "chat"}, "broken": {Task: "chat"}}, l)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	use(t, c, "chat")
	if _, err := c.Acquire(context.Background(), "broken", AcquireOptions{}); err == nil {
		t.Fatal("broken loaded")
	}
	before := scrapeSeries(t, reg)
	for i := range 2000 {
		id := fmt.Sprintf("nope-%d-%x", i, i*7919)
		if _, err := c.Acquire(context.Background(), id, AcquireOptions{}); !errors.Is(err, errNotFound) {
			t.Fatalf("Acquire(%s) = %v, want not found", id, err)
		}
	}
	after := scrapeSeries(t, reg)
	if after > before+1 {
		t.Errorf("2000 unknown ids took the scrape from %d to %d series, want at most one more", before, after)
	}
	if got := testutil.ToFloat64(c.m.loads.WithLabelValues("", "error")); got != 2000 {
		t.Errorf(`loads{model="",result="error"} = %v, want 2000`, got)
	}
	if got := testutil.ToFloat64(c.m.loads.WithLabelValues("broken", "error")); got != 1 {
		t.Errorf(`loads{model="broken",result="error"} = %v, want 1`, got)
	}
}

// scrapeSeries counts the series a scrape of reg holds, failing on a
// series that names an unknown model.
func scrapeSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			n++
			for _, lp := range m.GetLabel() {
				if strings.HasPrefix(lp.GetValue(), "nope-") {
					t.Fatalf("series %s{%s=%q}", mf.GetName(), lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	return n
}
