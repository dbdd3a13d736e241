package wire

import (
	"strings"
	"testing"
)

func TestParseQuantType(t *testing.T) {
	for name, want := range map[string]int32{"Q8_0": 7, "q4_k_m": 15, "Q4_K_S": 14, "Q5_K_M": 17} {
		q, err := ParseQuantType(name)
		if err != nil || q.Ftype != want || q.Name != strings.ToUpper(name) {
			t.Errorf("ParseQuantType(%q) = %+v, %v; want ftype %d", name, q, err, want)
		}
	}
	for _, bad := range []string{"", "F16", "Q4_K", "Q8_0 ", "IQ2_XXS"} {
		if _, err := ParseQuantType(bad); err == nil || !strings.Contains(err.Error(), "supported: Q4_0") {
			t.Errorf("ParseQuantType(%q) = %v, want an error listing the types", bad, err)
		}
	}
}

func TestQuantizeProgressLine(t *testing.T) {
	d, n, ok := ParseQuantizeProgress(QuantizeProgressLine(3, 57))
	if !ok || d != 3 || n != 57 {
		t.Errorf("round trip: %d %d %v", d, n, ok)
	}
	for _, bad := range []string{"progress 5 3", "progress -1 3", "progress 1 0", "progress 1", "progress a b", "done", "[ 1/ 2]"} {
		if _, _, ok := ParseQuantizeProgress(bad); ok {
			t.Errorf("ParseQuantizeProgress(%q) accepted", bad)
		}
	}
}
