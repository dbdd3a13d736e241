package hub

import (
	"context"
	"io"
)

// copyCtx copies src to dst in 1 MiB steps, stopping when ctx is done, and
// calls onWrite after each step with the bytes written so far.
func copyCtx(ctx context.Context, dst io.Writer, src io.Reader, onWrite func(n int64)) (int64, error) {
	buf := make([]byte, 1<<20)
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			total += int64(w)
			if onWrite != nil {
				onWrite(total)
			}
			if werr != nil {
				return total, werr
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// shown is what an error shows of a refused reference part: at most 64
// bytes of it.
func shown(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
