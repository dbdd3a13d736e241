package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modeld/modeld/api/core"
	"github.com/modeld/modeld/backends"
	"github.com/modeld/modeld/cache"
	"github.com/modeld/modeld/internal/imagetest"
	"github.com/modeld/modeld/models"
)

// testImage encodes a w×h gradient as format ("png" or "jpeg"), or a w×h
// two-colour checkerboard as "webp" (lossless).
func testImage(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	if format == "webp" {
		return imagetest.WebP(w, h, color.NRGBA{10, 20, 30, 255}, color.NRGBA{10, 200, 30, 255}, func(x, y int) bool { return (x+y)%2 == 0 })
	}
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.Set(x, y, color.NRGBA{uint8(40 * x), uint8(40 * y), 200, 255})
		}
	}
	var buf bytes.Buffer
	var err error
	if format == "jpeg" {
		err = jpeg.Encode(&buf, m, &jpeg.Options{Quality: 90})
	} else {
		err = png.Encode(&buf, m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hugePNG is a PNG whose header claims 65535×65535 pixels: decoding it
// would allocate 16 GiB.
func hugePNG() []byte {
	chunk := func(typ string, data []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
		out = append(out, typ...)
		out = append(out, data...)
		return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, 65535)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 65535)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	out := []byte("\x89PNG\r\n\x1a\n")
	out = append(out, chunk("IHDR", ihdr)...)
	out = append(out, chunk("IDAT", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01})...)
	return append(out, chunk("IEND", nil)...)
}

// imageRequests are one chat request per dialect carrying the image data
// (base64) in the dialect's own shape, with the field its refusals name.
func imageRequests(b64, media string) []struct{ dialect, path, body, param string } {
	url := "data:" + media + ";base64," + b64
	return []struct{ dialect, path, body, param string }{
		{"openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`, "messages"},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"` + media + `","data":"` + b64 + `"}},{"type":"text","text":"what is it?"}]}]}`, "messages"},
		{"anthropic tool_result", "/v1/messages", `{"model":"m","max_tokens":4,"tools":[{"name":"read","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"read it"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"the file:"},{"type":"image","source":{"type":"base64","media_type":"` + media + `","data":"` + b64 + `"}}]}]}]}`, "messages"},
		{"responses", "/v1/responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is it?"},{"type":"input_image","image_url":"` + url + `"}]}]}`, "input"},
		{"responses function_call_output", "/v1/responses", `{"model":"m","input":[{"role":"user","content":"look"},{"type":"function_call","call_id":"c1","name":"view_image","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":[{"type":"input_image","image_url":"` + url + `"}]}],"tools":[{"type":"function","name":"view_image","parameters":{"type":"object"}}]}`, "input"},
		{"ollama chat", "/api/chat", `{"model":"m","stream":false,"messages":[{"role":"user","content":"what is it?","images":["` + b64 + `"]}]}`, "messages"},
		{"ollama generate", "/api/generate", `{"model":"m","stream":false,"prompt":"what is it?","images":["` + b64 + `"]}`, "prompt"},
	}
}

// TestImagesEveryDialect: each dialect's image shape reaches the backend
// as a decoded image part (the pixels, in the message the client put it
// in), for PNG, JPEG and WebP.
func TestImagesEveryDialect(t *testing.T) {
	for _, format := range []string{"png", "jpeg", "webp"} {
		b64 := base64.StdEncoding.EncodeToString(testImage(t, format, 5, 3))
		for _, c := range imageRequests(b64, "image/"+format) {
			t.Run(format+"/"+c.dialect, func(t *testing.T) {
				f := &fakeChat{pieces: []string{"a cat"}, finish: backends.FinishStop, vision: true, template: true, gotReq: make(chan backends.Request, 1)}
				var loads int
				s := countingServer(t, f, &loads)
				w := post(t, s, c.path, c.body)
				if w.Code != 200 {
					t.Fatalf("status %d: %s", w.Code, w.Body)
				}
				req := <-f.gotReq
				var imgs []*backends.Image
				for _, m := range req.Messages {
					for _, p := range m.Parts {
						if p.Type == backends.PartImage {
							if !strings.Contains(c.dialect, "tool_result") && !strings.Contains(c.dialect, "function_call_output") && m.Role != "user" {
								t.Errorf("image in a %s message", m.Role)
							}
							imgs = append(imgs, p.Image)
						}
					}
				}
				if len(imgs) != 1 || imgs[0] == nil || imgs[0].Width != 5 || imgs[0].Height != 3 || len(imgs[0].RGB) != 5*3*3 || imgs[0].Format != format {
					t.Fatalf("backend got images %+v, want one decoded 5×3 %s", imgs, format)
				}
			})
		}
	}
}

// TestImagesRefused: a text-only model, a hostile header, broken data and a
// remote URL are each a 400 in the dialect's shape at its own field, and
// the hostile or broken ones load no model.
func TestImagesRefused(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(testImage(t, "png", 2, 2))
	cases := []struct {
		name, b64, code string
		loads           bool
	}{
		{"text-only model", good, "image_input_unsupported", true},
		{"65535x65535 header", base64.StdEncoding.EncodeToString(hugePNG()), "image_too_large", false},
		{"truncated", base64.StdEncoding.EncodeToString(testImage(t, "png", 2, 2)[:40]), "invalid_image", false},
		{"wrong magic", base64.StdEncoding.EncodeToString([]byte("GIF89a not really")), "", false},
	}
	for _, k := range cases {
		for _, c := range imageRequests(k.b64, "image/png") {
			t.Run(k.name+"/"+c.dialect, func(t *testing.T) {
				f := &fakeChat{pieces: []string{"x"}, finish: backends.FinishStop, template: true}
				loads := 0
				s := countingServer(t, f, &loads)
				w := post(t, s, c.path, c.body)
				if w.Code != 400 {
					t.Fatalf("status %d: %s", w.Code, w.Body)
				}
				msg, param, code := dialectError(t, c.dialect, w)
				if !strings.Contains(msg, "image") || strings.Contains(msg, "0x") {
					t.Errorf("message %q", msg)
				}
				if param != "" && param != c.param {
					t.Errorf("param %q, want %q", param, c.param)
				}
				if k.code != "" && code != "" && code != k.code {
					t.Errorf("code %q, want %q", code, k.code)
				}
				if !k.loads && loads != 0 {
					t.Errorf("a refused image loaded the model %d times", loads)
				}
			})
		}
	}
	// A remote URL is never fetched.
	f := &fakeChat{pieces: []string{"x"}, finish: backends.FinishStop, vision: true}
	s := chatServer(t, map[string]cache.Instance{"m": f})
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://127.0.0.1:1/a.png"}}]}]}`)
	if e := decodeError(t, w); w.Code != 400 || e.Error.Code != "remote_image_url" {
		t.Errorf("remote image: %d %s", w.Code, w.Body)
	}
}

// countingServer serves f as "m" on every dialect, counting its loads.
func countingServer(t *testing.T, f *fakeChat, loads *int) *Server {
	t.Helper()
	return countingServerWith(t, f, loads, func(*Options) {})
}

// countingServerWith is countingServer with options changed by opt.
func countingServerWith(t *testing.T, f *fakeChat, loads *int, opt func(*Options)) *Server {
	t.Helper()
	resolve := func(_ context.Context, id string) (cache.Spec, error) {
		if id != "m" {
			return cache.Spec{}, errors.New("model " + id + " not found")
		}
		return cache.Spec{ID: id, Task: "chat"}, nil
	}
	load := func(context.Context, cache.Spec) (cache.Instance, error) { *loads++; return f, nil }
	c, err := cache.New(cache.DefaultConfig(), resolve, load)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	o := Options{Constraints: testConstraints, Version: "test", Libs: backendsLibs(t), Cache: c}
	opt(&o)
	s := New(o)
	s.RegisterOllama(core.ModelsOptions{})
	return s
}

// dialectError reads a 400's message, param and code in the dialect's shape
// (Anthropic and Ollama have no param or code).
func dialectError(t *testing.T, dialect string, w *httptest.ResponseRecorder) (msg, param, code string) {
	t.Helper()
	var body map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("not JSON: %s", w.Body)
	}
	switch {
	case strings.HasPrefix(dialect, "ollama"):
		m, ok := body["error"].(string)
		if !ok {
			t.Fatalf("not Ollama's shape: %s", w.Body)
		}
		return m, "", ""
	case strings.HasPrefix(dialect, "anthropic"):
		e, _ := body["error"].(map[string]any)
		if body["type"] != "error" || e == nil {
			t.Fatalf("not Anthropic's shape: %s", w.Body)
		}
		return fmt.Sprint(e["message"]), "", ""
	}
	e, _ := body["error"].(map[string]any)
	if e == nil {
		t.Fatalf("not OpenAI's shape: %s", w.Body)
	}
	p, _ := e["param"].(string)
	c, _ := e["code"].(string)
	return fmt.Sprint(e["message"]), p, c
}

// TestRemoteImagesWhenAllowed: with FetchImage set (--allow-remote-images)
// an http(s) image URL is read through it, before the model loads, and
// decoded as an inline one; a URL it cannot read is a 400 that loads
// nothing.
func TestRemoteImagesWhenAllowed(t *testing.T) {
	png := testImage(t, "png", 4, 2)
	var asked []string
	fetch := func(_ context.Context, url string, limit int64) ([]byte, error) {
		asked = append(asked, url)
		if limit != core.ImageLimits.MaxBytes {
			t.Errorf("limit %d", limit)
		}
		if strings.HasSuffix(url, "/a.png") {
			return png, nil
		}
		return nil, fmt.Errorf("%w: 10.1.2.3 is private", models.ErrPrivateTarget)
	}
	f := &fakeChat{pieces: []string{"x"}, finish: backends.FinishStop, vision: true, template: true, gotReq: make(chan backends.Request, 1)}
	loads := 0
	s := countingServerWith(t, f, &loads, func(o *Options) { o.FetchImage = fetch })
	w := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://images.example/a.png"}}]}]}`)
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	req := <-f.gotReq
	if img := req.Messages[0].Parts[0].Image; img == nil || img.Width != 4 || img.Height != 2 {
		t.Fatalf("backend got %+v", req.Messages[0].Parts)
	}
	loads = 0
	w = post(t, s, "/v1/messages", `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://127.0.0.1:8080/secret"}}]}]}`)
	if msg, _, _ := dialectError(t, "anthropic", w); w.Code != 400 || !strings.Contains(msg, "private address") || strings.Contains(msg, "10.1.2.3") || loads != 0 {
		t.Errorf("unreadable URL: %d %s (loads %d)", w.Code, w.Body, loads)
	}
	if len(asked) != 2 {
		t.Errorf("fetched %v", asked)
	}
}

// TestChatImagesPixelBound: a chat request's images together are bounded
// at 1<<24 pixels (their RGB crosses the runner socket): three 2400×2400
// images are a 400 too_many or too_large that loads nothing; two pass.
func TestChatImagesPixelBound(t *testing.T) {
	big := base64.StdEncoding.EncodeToString(testImage(t, "png", 2400, 2400))
	part := `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + big + `"}}`
	for n, want := range map[int]int{2: 200, 3: 400} {
		f := &fakeChat{pieces: []string{"x"}, finish: backends.FinishStop, vision: true, template: true}
		loads := 0
		s := countingServer(t, f, &loads)
		body := `{"model":"m","messages":[{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(part+",", n), ",") + `]}]}`
		w := post(t, s, "/v1/chat/completions", body)
		if w.Code != want {
			t.Fatalf("%d images: %d %.300s", n, w.Code, w.Body)
		}
		if want == 400 {
			if e := decodeError(t, w); e.Error.Code != "image_too_large" || loads != 0 {
				t.Errorf("%d images: code %v, %d loads", n, e.Error.Code, loads)
			}
		}
	}
}
