package pipelines

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/modeld/modeld/backends"
)

// imageProcessor is a model's preprocessor_config.json: the steps
// transformers.js's ImageProcessor runs on an RGB image, in its order —
// resize, center crop, rescale, normalize — and then HWC -> CHW.
type imageProcessor struct {
	resize              bool
	height, width       int // resize to exactly this (when > 0)
	shortest, longest   int // or keep the aspect: shortest edge, longest edge (0 = none)
	resample            int // 0 nearest, 2 bilinear, 3 bicubic
	crop                bool
	cropH, cropW        int
	rescale             bool
	rescaleFactor       float64
	normalize           bool
	mean, std           [3]float64
	outHeight, outWidth int // the tensor's spatial size when the steps fix it (0: varies)
}

// preprocessorJSON is the part of preprocessor_config.json modeld reads; the
// options it does not implement are read so that a model asking for them is
// refused rather than served differently.
type preprocessorJSON struct {
	DoResize       *bool           `json:"do_resize"`
	Size           json.RawMessage `json:"size"`
	ImageSize      json.RawMessage `json:"image_size"`
	MaxSize        *int            `json:"max_size"`
	Resample       *int            `json:"resample"`
	DoCenterCrop   bool            `json:"do_center_crop"`
	CropSize       json.RawMessage `json:"crop_size"`
	DoRescale      *bool           `json:"do_rescale"`
	RescaleFactor  *float64        `json:"rescale_factor"`
	DoNormalize    bool            `json:"do_normalize"`
	ImageMean      json.RawMessage `json:"image_mean"`
	ImageStd       json.RawMessage `json:"image_std"`
	Mean           json.RawMessage `json:"mean"`
	Std            json.RawMessage `json:"std"`
	DoConvertRGB   *bool           `json:"do_convert_rgb"`
	DoPad          bool            `json:"do_pad"`
	DoThumbnail    bool            `json:"do_thumbnail"`
	DoCropMargin   bool            `json:"do_crop_margin"`
	DoFlipChannels bool            `json:"do_flip_channel_order"`
	KeepAspect     bool            `json:"keep_aspect_ratio"`
	SizeDivisor    *int            `json:"size_divisibility"`
	SizeDivisor2   *int            `json:"size_divisor"`
}

// readImageProcessor reads dir/preprocessor_config.json.
func readImageProcessor(dir string) (*imageProcessor, error) {
	path := filepath.Join(dir, "preprocessor_config.json")
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pipelines: %s has no preprocessor_config.json, so it is not an image model: %w", dir, ErrWrongModel)
		}
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	defer f.Close() //nolint:errcheck // read-only
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("pipelines: %w", err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("pipelines: %s is more than %d bytes", path, MaxConfigBytes)
	}
	var j preprocessorJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w: %w", path, err, ErrWrongModel)
	}
	p, err := j.processor()
	if err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w: %w", path, err, ErrWrongModel)
	}
	return p, nil
}

func (j *preprocessorJSON) processor() (*imageProcessor, error) {
	var errs []error
	for name, on := range map[string]bool{
		"do_pad": j.DoPad, "do_thumbnail": j.DoThumbnail, "do_crop_margin": j.DoCropMargin,
		"do_flip_channel_order": j.DoFlipChannels, "keep_aspect_ratio": j.KeepAspect,
		"size_divisibility": j.SizeDivisor != nil || j.SizeDivisor2 != nil,
	} {
		if on {
			errs = append(errs, fmt.Errorf("%s is not supported", name))
		}
	}
	if j.DoConvertRGB != nil && !*j.DoConvertRGB {
		errs = append(errs, errors.New("do_convert_rgb false is not supported (images are RGB)"))
	}
	p := &imageProcessor{resample: 2, rescale: true, rescaleFactor: 1.0 / 255, crop: j.DoCenterCrop, normalize: j.DoNormalize}
	size := j.Size
	if len(size) == 0 {
		size = j.ImageSize
	}
	p.resize = len(size) > 0 && string(size) != "null"
	if j.DoResize != nil {
		p.resize = *j.DoResize
	}
	if p.resize {
		var n int
		var hw struct {
			Height, Width int
			ShortestEdge  int `json:"shortest_edge"`
			LongestEdge   int `json:"longest_edge"`
		}
		switch {
		case json.Unmarshal(size, &n) == nil:
			p.shortest, p.longest = n, n
			if j.MaxSize != nil {
				p.longest = *j.MaxSize
			}
		case json.Unmarshal(size, &hw) == nil && hw.ShortestEdge+hw.LongestEdge > 0:
			p.shortest, p.longest = hw.ShortestEdge, hw.LongestEdge
		case json.Unmarshal(size, &hw) == nil && hw.Height > 0 && hw.Width > 0:
			p.height, p.width = hw.Height, hw.Width
		default:
			errs = append(errs, fmt.Errorf("size %s is not supported", size))
		}
	}
	if j.Resample != nil {
		p.resample = *j.Resample
	}
	if p.resample != 0 && p.resample != 2 && p.resample != 3 {
		errs = append(errs, fmt.Errorf("resample %d is not supported (0 nearest, 2 bilinear, 3 bicubic)", p.resample))
	}
	if p.crop {
		var n int
		var hw struct{ Height, Width int }
		switch {
		case json.Unmarshal(j.CropSize, &n) == nil && n > 0:
			p.cropH, p.cropW = n, n
		case json.Unmarshal(j.CropSize, &hw) == nil && hw.Height > 0 && hw.Width > 0:
			p.cropH, p.cropW = hw.Height, hw.Width
		default:
			errs = append(errs, fmt.Errorf("crop_size %s is not supported", j.CropSize))
		}
	}
	if j.DoRescale != nil {
		p.rescale = *j.DoRescale
	}
	if j.RescaleFactor != nil {
		p.rescaleFactor = *j.RescaleFactor
	}
	if p.normalize {
		mean, std := j.ImageMean, j.ImageStd
		if len(mean) == 0 {
			mean = j.Mean
		}
		if len(std) == 0 {
			std = j.Std
		}
		var err error
		if p.mean, err = channels(mean); err != nil {
			errs = append(errs, fmt.Errorf("image_mean: %w", err))
		}
		if p.std, err = channels(std); err != nil {
			errs = append(errs, fmt.Errorf("image_std: %w", err))
		}
	}
	for _, v := range []int{p.height, p.width, p.shortest, p.longest, p.cropH, p.cropW} {
		if v < 0 || v > 4096 {
			errs = append(errs, fmt.Errorf("an image size of %d is out of range", v))
		}
	}
	switch {
	case p.crop:
		p.outHeight, p.outWidth = p.cropH, p.cropW
	case p.resize && p.height > 0:
		p.outHeight, p.outWidth = p.height, p.width
	}
	return p, errors.Join(errs...)
}

// channels reads a per-channel value: a number or an array of three.
func channels(raw json.RawMessage) ([3]float64, error) {
	var one float64
	if json.Unmarshal(raw, &one) == nil {
		return [3]float64{one, one, one}, nil
	}
	var three []float64
	if err := json.Unmarshal(raw, &three); err != nil || len(three) != 3 {
		return [3]float64{}, fmt.Errorf("want a number or three numbers, got %s", strconv.Quote(string(raw)))
	}
	return [3]float64{three[0], three[1], three[2]}, nil
}

// rgbImage is an 8-bit RGB raster being preprocessed.
type rgbImage struct {
	w, h int
	pix  []byte
}

// resizeTo is transformers.js's get_resize_output_image_size for the
// processor's size.
func (p *imageProcessor) resizeTo(w, h int) (int, int) {
	if p.height > 0 {
		return p.width, p.height
	}
	short := 1.0
	if p.shortest > 0 {
		short = math.Max(float64(p.shortest)/float64(w), float64(p.shortest)/float64(h))
	}
	nw, nh := float64(w)*short, float64(h)*short
	long := 1.0
	if p.longest > 0 {
		long = math.Min(float64(p.longest)/nw, float64(p.longest)/nh)
	}
	// transformers.js rounds to two decimals before flooring.
	round2 := func(v float64) int {
		r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'f', 2, 64), 64)
		return int(math.Floor(r))
	}
	return round2(nw * long), round2(nh * long)
}

// preprocess turns img into the model's pixel_values, CHW float32, and
// returns its height and width.
func (p *imageProcessor) preprocess(img *backends.Image) ([]float32, int, int) {
	m := rgbImage{w: img.Width, h: img.Height, pix: img.RGB}
	if p.resize {
		if w, h := p.resizeTo(m.w, m.h); w != m.w || h != m.h {
			m = resample(m, max(w, 1), max(h, 1), p.resample)
		}
	}
	if p.crop && (m.w != p.cropW || m.h != p.cropH) {
		m = centerCrop(m, p.cropW, p.cropH)
	}
	plane := m.w * m.h
	out := make([]float32, 3*plane)
	for i := 0; i < plane; i++ {
		for c := 0; c < 3; c++ {
			// Each step stores float32, as transformers.js's Float32Array does.
			v := float32(m.pix[i*3+c])
			if p.rescale {
				v = float32(p.rescaleFactor * float64(v))
			}
			if p.normalize {
				v = float32((float64(v) - p.mean[c]) / p.std[c])
			}
			out[c*plane+i] = v
		}
	}
	return out, m.h, m.w
}

// centerCrop is transformers.js's center_crop: per axis, a crop starting at
// floor((size - crop) / 2), or, for a crop larger than the image, the image
// placed at floor((crop - size) / 2) on black.
func centerCrop(m rgbImage, cw, ch int) rgbImage {
	off := func(size, crop int) (src, dst int) {
		o := float64(size-crop) / 2
		if o >= 0 {
			return int(math.Floor(o)), 0
		}
		return 0, int(math.Floor(-o))
	}
	sx, dx := off(m.w, cw)
	sy, dy := off(m.h, ch)
	out := rgbImage{w: cw, h: ch, pix: make([]byte, cw*ch*3)}
	for y := 0; y < ch; y++ {
		yy := y - dy + sy
		if yy < 0 || yy >= m.h || y < dy {
			continue
		}
		for x := 0; x < cw; x++ {
			xx := x - dx + sx
			if xx < 0 || xx >= m.w || x < dx {
				continue
			}
			copy(out.pix[(y*cw+x)*3:][:3], m.pix[(yy*m.w+xx)*3:][:3])
		}
	}
	return out
}
