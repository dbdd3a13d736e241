package pipelines

import "math"

// softmax in float64, as transformers.js computes it (max-shifted exponentials).
func softmax(x []float32) []float64 {
	out := make([]float64, len(x))
	if len(x) == 0 {
		return out
	}
	m := float64(x[0])
	for _, v := range x[1:] {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for i, v := range x {
		out[i] = math.Exp(float64(v) - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// logSoftmax in float64.
func logSoftmax(x []float32) []float64 {
	out := make([]float64, len(x))
	if len(x) == 0 {
		return out
	}
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

func sigmoid(x float32) float64 { return 1 / (1 + math.Exp(-float64(x))) }

// l2Normalize scales v to unit length in place (a zero vector stays zero).
func l2Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	n := math.Sqrt(sum)
	if n == 0 {
		return
	}
	for i, x := range v {
		v[i] = float32(float64(x) / n)
	}
}

// argmax returns the first index of the largest value.
func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
