package api

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/api/store"
	"github.com/modeld/modeld/models"
)

// TestModelsListDiskUsage: the list gives each model's disk use as modeld du
// counts it (a blob two models share is shared bytes of both and own bytes
// of neither) and the store's totals.
func TestModelsListDiskUsage(t *testing.T) {
	s := newTestServer(t)
	st := storeWithModels(t)
	src := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(src, tinyGGUF(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), src, models.ImportOptions{Name: "org/twin"}, nil); err != nil {
		t.Fatal(err)
	}
	s.RegisterModels(core.ModelsOptions{Store: st})
	w := do(t, s, "GET", "/v1/models", nil)
	var list struct {
		Data      []store.ModelObject `json:"data"`
		DiskUsage struct {
			Blobs, Manifests, Total int64
		} `json:"disk_usage"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != 200 {
		t.Fatalf("GET /v1/models = %d %s", w.Code, w.Body)
	}
	byID := map[string]store.ModelObject{}
	for _, m := range list.Data {
		if m.UniqueBytes == nil || m.SharedBytes == nil {
			t.Fatalf("%s has no disk use: %s", m.ID, w.Body)
		}
		byID[m.ID] = m
	}
	chat, twin, embed := byID["org/chat"], byID["org/twin"], byID["org/embed"]
	if *chat.UniqueBytes != 0 || *chat.SharedBytes != chat.SizeBytes || !slices.Equal(chat.SharedWith, []string{"org/twin"}) {
		t.Errorf("org/chat: own %d shared %d with %v, want 0, %d with org/twin", *chat.UniqueBytes, *chat.SharedBytes, chat.SharedWith, chat.SizeBytes)
	}
	if *twin.SharedBytes != twin.SizeBytes || !slices.Equal(twin.SharedWith, []string{"org/chat"}) {
		t.Errorf("org/twin: shared %d with %v", *twin.SharedBytes, twin.SharedWith)
	}
	// Two of org/embed's files hold the same bytes: one blob, counted once.
	if *embed.UniqueBytes <= 0 || *embed.UniqueBytes >= embed.SizeBytes || *embed.SharedBytes != 0 {
		t.Errorf("org/embed: own %d shared %d, want 0 < own < %d and 0 shared", *embed.UniqueBytes, *embed.SharedBytes, embed.SizeBytes)
	}
	if u := list.DiskUsage; u.Blobs != chat.SizeBytes+*embed.UniqueBytes || u.Manifests <= 0 || u.Total < u.Blobs+u.Manifests {
		t.Errorf("disk_usage = %+v, want blobs %d", u, chat.SizeBytes+*embed.UniqueBytes)
	}
}
