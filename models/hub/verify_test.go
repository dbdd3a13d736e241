package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"errors"
	"testing"
)

// Verify's finding is what the next load goes by, even when the file looks
// unchanged; and a pull of the model fetches the bad blob again.
func TestCorruptBlobRefusedAndRepairedByPull(t *testing.T) {
	e := newPullEnv(t, nil)
	e.h.addRepo("org/tiny", ggufRepo(t))
	ctx := context.Background()
	m, err := e.p.Pull(ctx, "hf:org/tiny:Q4_K_M", PullOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	blob, _ := e.s.FilePath(m, m.Files[0].Path)
	flipByte(t, blob, 64)
	if rep, err := e.s.Verify(ctx, m.ID); err != nil || rep.OK() {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if err := e.s.VerifyForLoad(ctx, m); !errors.Is(err, models.ErrCorruptBlob) {
		t.Fatalf("load after verify: %v", err)
	}
	gets, _, _ := e.h.counts()
	if _, err := e.p.Pull(ctx, "hf:org/tiny:Q4_K_M", PullOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := e.h.counts(); again != gets+1 {
		t.Errorf("the corrupt blob was not fetched again (%d -> %d CDN GETs)", gets, again)
	}
	if err := e.s.VerifyForLoad(ctx, m); err != nil {
		t.Errorf("after the pull: %v", err)
	}
}
