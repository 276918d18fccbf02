package trace

import "time"

// appendDuration appends d formatted exactly as time.Duration.String does,
// without allocating: every trace record carries its virtual time in Go
// duration syntax. TestAppendDuration checks it against the standard form.
func appendDuration(b []byte, d time.Duration) []byte {
	// Fast path: whole milliseconds under a minute, which is what nearly
	// every simulated step's time is.
	if d > 0 && d < time.Minute && d%time.Millisecond == 0 {
		ms := int64(d / time.Millisecond)
		if ms < 1000 {
			b = appendSmallUint(b, uint64(ms))
			return append(b, 'm', 's')
		}
		b = appendSmallUint(b, uint64(ms/1000))
		if f := ms % 1000; f != 0 {
			b = append(b, '.', byte('0'+f/100))
			if f%100 != 0 {
				b = append(b, byte('0'+f/10%10))
				if f%10 != 0 {
					b = append(b, byte('0'+f%10))
				}
			}
		}
		return append(b, 's')
	}
	var arr [32]byte
	n := formatDuration(&arr, d)
	return append(b, arr[n:]...)
}

// formatDuration is time.Duration.String's algorithm, writing into the end
// of buf and returning the start index.
func formatDuration(buf *[32]byte, d time.Duration) int {
	w := len(buf)
	u := uint64(d)
	neg := d < 0
	if neg {
		u = -u
	}
	if u < uint64(time.Second) {
		var prec int
		w--
		buf[w] = 's'
		w--
		switch {
		case u == 0:
			buf[w] = '0'
			return w
		case u < uint64(time.Microsecond):
			prec = 0
			buf[w] = 'n'
		case u < uint64(time.Millisecond):
			prec = 3
			// U+00B5 'µ' micro sign == 0xC2 0xB5
			w--
			copy(buf[w:], "µ")
		default:
			prec = 6
			buf[w] = 'm'
		}
		w, u = fmtFrac(buf[:w], u, prec)
		w = fmtInt(buf[:w], u)
	} else {
		w--
		buf[w] = 's'
		w, u = fmtFrac(buf[:w], u, 9)
		w = fmtInt(buf[:w], u%60)
		u /= 60
		if u > 0 {
			w--
			buf[w] = 'm'
			w = fmtInt(buf[:w], u%60)
			u /= 60
			if u > 0 {
				w--
				buf[w] = 'h'
				w = fmtInt(buf[:w], u)
			}
		}
	}
	if neg {
		w--
		buf[w] = '-'
	}
	return w
}

func fmtFrac(buf []byte, v uint64, prec int) (nw int, nv uint64) {
	w := len(buf)
	print := false
	// Trailing zero digits print nothing: drop them three at a time first
	// (virtual times are mostly whole milliseconds).
	i := 0
	for i+3 <= prec && v%1000 == 0 {
		v /= 1000
		i += 3
	}
	for ; i < prec; i++ {
		digit := v % 10
		print = print || digit != 0
		if print {
			w--
			buf[w] = byte(digit) + '0'
		}
		v /= 10
	}
	if print {
		w--
		buf[w] = '.'
	}
	return w, v
}

func fmtInt(buf []byte, v uint64) int {
	w := len(buf)
	if v == 0 {
		w--
		buf[w] = '0'
	} else {
		for v > 0 {
			w--
			buf[w] = byte(v%10) + '0'
			v /= 10
		}
	}
	return w
}
