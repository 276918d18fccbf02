package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"
)

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func parseAt(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad time %q: %w", s, err)
	}
	return d, nil
}
