package protocol

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"

	"github.com/escapement/escapement/kernel"
)

// Transcript is a list of chat messages, compressed (DEFLATE of its JSON
// form) so that a long conversation fits the service's payload limit
// several times over. The zero value is the empty transcript.
type Transcript struct {
	// Packed is the compressed JSON array; it travels as base64.
	Packed []byte `json:"packed,omitempty"`
}

// Pack compresses msgs. Compression is deterministic, so a workflow that
// packs the same messages on replay produces the same bytes.
func Pack(msgs []kernel.Message) (Transcript, error) {
	if len(msgs) == 0 {
		return Transcript{}, nil
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript: %w", err)
	}
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.BestSpeed)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return Transcript{}, fmt.Errorf("transcript: %w", err)
	}
	if err := w.Close(); err != nil {
		return Transcript{}, fmt.Errorf("transcript: %w", err)
	}
	return Transcript{Packed: b.Bytes()}, nil
}

// IsZero reports whether t holds no messages (for omitzero).
func (t Transcript) IsZero() bool { return len(t.Packed) == 0 }

// Messages decompresses t.
func (t Transcript) Messages() ([]kernel.Message, error) {
	if len(t.Packed) == 0 {
		return nil, nil
	}
	raw, err := io.ReadAll(flate.NewReader(bytes.NewReader(t.Packed)))
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	var msgs []kernel.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	return msgs, nil
}
