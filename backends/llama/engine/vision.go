package engine

import (
	"fmt"
	"sync"
	"unsafe"

	yz "github.com/hybridgroup/yzma/pkg/llama"
	"github.com/hybridgroup/yzma/pkg/mtmd"

	"github.com/modeld/modeld/backends"
)

// Images in chat (vision.go, visionprompt.go): a model opened with its
// multimodal projector (Options.Projector) reads the decoded images of a
// request's messages through llama.cpp's multimodal library (mtmd). An
// image is given to mtmd as 8-bit RGB pixels that internal/imagein decoded
// in Go, within its limits: no encoded image bytes reach native code.
//
// A prompt with images is a token list like any other, in which each
// image's tokens stand as runs of backends.ImageToken: its length is the
// prompt's exact token count (what usage, tokenize and count_tokens say),
// and the text tokens around the images are those ChatPrompt gives a
// text-only conversation (text from the messages never gives control
// tokens). Generate takes the images from the request's messages, in
// order, and checks that each one's tokens stand where the prompt has them.
//
// Such a prompt is evaluated whole when its request takes a slot: the text
// runs through llama_decode, each image through mtmd (encoder, projector,
// then the embeddings into the sequence). Its KV is never reused: the slot
// caches nothing of it for a later prompt, and it is not saved to the
// on-disk prompt cache, so a text-only prompt never reuses image KV and an
// image prompt never reuses a text prefix. A request with images has one
// choice (n 1) and no prompt lookup.

// vision is a model's multimodal context. mu serialises every call into
// it: mtmd's tokenizer runs on the callers' goroutines, its encoder on the
// scheduler's, and the library is not safe for concurrent use.
type vision struct {
	mu  sync.Mutex
	ctx mtmd.Context
}

// openVision loads the projector at path for ym; threads is the encoder's
// thread count.
func openVision(path string, ym yz.Model, threads int, gpu bool) (*vision, error) {
	p := mtmd.ContextParamsDefault()
	p.UseGPU = gpu
	p.PrintTimings = false
	p.Threads = int32(threads)
	p.Warmup = true // a projector that cannot encode fails here, not in a request
	ctx, err := mtmd.InitFromFile(path, ym, p)
	if err != nil {
		return nil, fmt.Errorf("%w: llama.cpp's multimodal library could not load the projector %s with this model (a projector made for another model?): %w", ErrInvalidModel, path, err)
	}
	if !mtmd.SupportVision(ctx) {
		_ = mtmd.Free(ctx)
		return nil, fmt.Errorf("%w: the projector %s has no vision encoder", ErrInvalidModel, path)
	}
	return &vision{ctx: ctx}, nil
}

func (v *vision) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ctx != 0 {
		_ = mtmd.Free(v.ctx)
		v.ctx = 0
	}
}

// imageUnit is one image as mtmd tokenized it: its chunks (the image's
// tokens and any text tokens the projector puts around them) and the
// prompt tokens they stand for, backends.ImageToken where the image is.
type imageUnit struct {
	chunks mtmd.InputChunks // nil once freed
	flat   []int32
	lead   int // flat's text tokens before the first image token
	images int // image tokens
}

// tokenizeImage makes img's unit. keep false frees its chunks at once (a
// prompt that is only counted).
func (v *vision) tokenizeImage(img *backends.Image, keep bool) (*imageUnit, error) {
	if img == nil || img.Width < 1 || img.Height < 1 || len(img.RGB) != img.Width*img.Height*3 {
		return nil, &backends.BadRequestError{Param: "messages", Message: "an image part was not decoded into RGB pixels of its size"}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ctx == 0 {
		return nil, ErrClosed
	}
	// mtmd_bitmap_init copies the pixels.
	bm := mtmd.BitmapInit(uint32(img.Width), uint32(img.Height), uintptr(unsafe.Pointer(&img.RGB[0])))
	if bm == 0 {
		return nil, fmt.Errorf("%w: the multimodal library could not take a %dx%d image", ErrDecode, img.Width, img.Height)
	}
	defer mtmd.BitmapFree(bm)
	chunks := mtmd.InputChunksInit()
	if rc := mtmd.TokenizeFromParts(v.ctx, chunks, []*mtmd.InputPart{mtmd.NewInputBitmapPart(bm)}, false); rc != 0 {
		mtmd.InputChunksFree(chunks)
		return nil, &backends.BadRequestError{Param: "messages", Message: fmt.Sprintf("the model's projector could not preprocess a %dx%d image", img.Width, img.Height)}
	}
	u := &imageUnit{chunks: chunks, lead: -1}
	for i := range mtmd.InputChunksSize(chunks) {
		c := mtmd.InputChunksGet(chunks, i)
		switch mtmd.InputChunkGetType(c) {
		case mtmd.InputChunkTypeText:
			for _, t := range mtmd.InputChunkGetTokensText(c) {
				u.flat = append(u.flat, int32(t))
			}
		case mtmd.InputChunkTypeImage:
			n := int(mtmd.InputChunkGetNTokens(c))
			if u.lead < 0 {
				u.lead = len(u.flat)
			}
			for range n {
				u.flat = append(u.flat, backends.ImageToken)
			}
			u.images += n
		default:
			mtmd.InputChunksFree(chunks)
			return nil, fmt.Errorf("%w: the projector gave a chunk that is neither text nor image", ErrDecode)
		}
	}
	if u.lead < 0 || u.images == 0 {
		mtmd.InputChunksFree(chunks)
		return nil, fmt.Errorf("%w: the projector gave no image tokens for an image", ErrDecode)
	}
	if !keep {
		mtmd.InputChunksFree(chunks)
		u.chunks = 0
	}
	return u, nil
}

// free releases u's chunks; safe to call twice.
func (v *vision) free(u *imageUnit) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if u.chunks != 0 {
		mtmd.InputChunksFree(u.chunks)
		u.chunks = 0
	}
}

// eval evaluates u's chunks into seq of lctx from position pos, the last
// chunk's last token with logits when last is set; it returns the next
// position.
func (v *vision) eval(lctx yz.Context, u *imageUnit, pos, seq, nBatch int, last bool) (int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ctx == 0 || u.chunks == 0 {
		return 0, ErrClosed
	}
	var next yz.Pos
	if rc := mtmd.HelperEvalChunks(v.ctx, lctx, u.chunks, yz.Pos(pos), yz.SeqId(seq), int32(nBatch), last, &next); rc != 0 {
		return 0, fmt.Errorf("%w: evaluating an image returned %d", ErrDecode, rc)
	}
	return int(next), nil
}
