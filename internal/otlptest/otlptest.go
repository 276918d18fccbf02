// Package otlptest is a loopback OTLP trace receiver for tests: an
// OTLP/HTTP endpoint (POST /v1/traces, binary protobuf, gzip or not) and an
// OTLP/gRPC one (the TraceService), each decoding exactly what an exporter
// sent with the official OTLP protobuf types (go.opentelemetry.io/proto/otlp),
// and keeping every span it received.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver collects the spans exporters send it.
type Receiver struct {
	// URL is the OTLP/HTTP endpoint's base (OTEL_EXPORTER_OTLP_ENDPOINT);
	// GRPC the OTLP/gRPC one's address (http://GRPC for the variable).
	URL  string
	GRPC string

	http *httptest.Server
	grpc *grpc.Server
	lis  net.Listener

	mu      sync.Mutex
	changed chan struct{}
	spans   []Span
	errs    []error
	// block, when set, holds every request until it is closed (a
	// receiver that does not answer).
	block <-chan struct{}
}

// Span is one received span with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	Resource []*commonpb.KeyValue
	Scope    string
}

// Start starts both endpoints on loopback; Close stops them.
func Start() (*Receiver, error) { return StartBlocked(nil) }

// StartBlocked starts a receiver that holds every request until release
// is closed (nil: none).
func StartBlocked(release <-chan struct{}) (*Receiver, error) {
	r := &Receiver{changed: make(chan struct{}), block: release}
	r.http = httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	r.URL = r.http.URL
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.http.Close()
		return nil, err
	}
	r.lis, r.GRPC = lis, lis.Addr().String()
	r.grpc = grpc.NewServer()
	coltrace.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	go r.grpc.Serve(lis) //nolint:errcheck // owned: Close stops it
	return r, nil
}

// Close stops both endpoints.
func (r *Receiver) Close() {
	r.grpc.Stop()
	r.http.Close()
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if r.block != nil {
		select {
		case <-r.block:
		case <-req.Context().Done():
			return
		}
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.fail(fmt.Errorf("%s %s: want POST /v1/traces", req.Method, req.URL.Path))
		http.NotFound(w, req)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.fail(fmt.Errorf("content type %q: want application/x-protobuf", ct))
		http.Error(w, "content type", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.fail(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.fail(fmt.Errorf("decode ExportTraceServiceRequest: %w", err))
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.take(&msg)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(out))
}

type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(ctx context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	if s.r.block != nil {
		select {
		case <-s.r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.r.take(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

func (r *Receiver) take(msg *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Span: sp, Resource: rs.GetResource().GetAttributes(), Scope: ss.GetScope().GetName()})
			}
		}
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Receiver) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// Spans are the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Errs are the requests the receiver could not take (a wrong path or
// content type, a body that does not decode).
func (r *Receiver) Errs() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// WaitFor waits until cond holds of the spans received, or ctx ends.
func (r *Receiver) WaitFor(ctx context.Context, cond func([]Span) bool) error {
	for {
		r.mu.Lock()
		ok, ch := cond(r.spans), r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Attr is the span's attribute key (nil when it has none).
func (s Span) Attr(key string) *commonpb.AnyValue {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue()
		}
	}
	return nil
}

// Str is the span's string attribute key ("" when it has none).
func (s Span) Str(key string) string { return s.Attr(key).GetStringValue() }

// Has reports whether the span has attribute key.
func (s Span) Has(key string) bool { return s.Attr(key) != nil }

// ID and ParentID are the span's ids in hex ("" for no parent).
func (s Span) ID() string { return hex.EncodeToString(s.GetSpanId()) }

// ParentID is the hex id of the span's parent ("" for a root span).
func (s Span) ParentID() string { return hex.EncodeToString(s.GetParentSpanId()) }

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.GetTraceId()) }
