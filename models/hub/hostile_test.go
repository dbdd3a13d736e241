package hub

import (
	"github.com/modeld/modeld/models"

	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modeld/modeld/internal/ggufgen"
)

// Pull runs the same check on what it fetched: a hostile GGUF on the hub is
// refused and no manifest is written.
func TestPullRefusesHostileGGUF(t *testing.T) {
	e := newPullEnv(t, nil)
	var cases []ggufgen.Hostile
	for _, h := range ggufgen.HostileFiles() {
		switch h.Name {
		case "nested arrays 10^6 deep", "array length 2^62", "tensor count 2^62", "offset past the end", "data cut short",
			"block count 2^32-1", "fewer scores than tokens":
			cases = append(cases, h)
		}
	}
	if len(cases) != 7 {
		t.Fatalf("%d cases", len(cases))
	}
	before := storeFiles(t, e.s)
	for i, h := range cases {
		t.Run(h.Name, func(t *testing.T) {
			repo := "evil/Bad" + strconv.Itoa(i) + "-GGUF"
			e.h.addRepo(repo, map[string][]byte{"bad-Q4_K_M.gguf": h.Data})
			_, err := e.p.Pull(context.Background(), "hf:"+repo, PullOptions{}, nil)
			if !errors.Is(err, models.ErrInvalidModel) || !strings.Contains(err.Error(), "bad-Q4_K_M.gguf") || !strings.Contains(err.Error(), h.Want) {
				t.Fatalf("pull = %v, want ErrInvalidModel naming the file and saying %q", err, h.Want)
			}
			// No blob, partial, sidecar or lock of the refused file stays.
			if after := storeFiles(t, e.s); !slices.Equal(after, before) {
				t.Fatalf("store files after the refused pull:\n%v\nbefore:\n%v", after, before)
			}
		})
	}
	// A refused file that was already a blob (imported without a check, or
	// left by an older modeld) is refused as well, and not pulled again.
	orphan := cases[0].Data
	sum := sha256.Sum256(orphan)
	digest := hex.EncodeToString(sum[:])
	if err := os.WriteFile(blobPath(t, e.s, digest), orphan, 0o644); err != nil {
		t.Fatal(err)
	}
	e.h.addRepo("evil/Orphan-GGUF", map[string][]byte{"bad-Q4_K_M.gguf": orphan})
	if _, err := e.p.Pull(context.Background(), "hf:evil/Orphan-GGUF", PullOptions{}, nil); !errors.Is(err, models.ErrInvalidModel) {
		t.Fatalf("pull of a refused file already in blobs/ = %v, want ErrInvalidModel", err)
	}
	if ms, err := e.s.List(); err != nil || len(ms) != 0 {
		t.Errorf("List = %v, %v after refused pulls", ms, err)
	}
}
