package otel

import (
	"errors"
	"fmt"
	"strings"
)

// The standard variables this package reads itself; the OTLP exporters and
// the SDK read the rest of the OTEL_* configuration (headers, timeouts,
// TLS, the batch processor, the sampler, the resource).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
	// EnvCaptureContent is the GenAI conventions' opt-in for message
	// content on spans.
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// The OTLP protocols an exporter can speak.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// ErrBadSetting wraps every refusal of a variable's value.
var ErrBadSetting = errors.New("bad OpenTelemetry setting")

// Settings are what the environment asks of the export.
type Settings struct {
	// Protocol is ProtocolHTTP (the specification's default) or
	// ProtocolGRPC.
	Protocol string
	// Content records message contents on spans (the opt-in).
	Content bool
}

// FromEnv reads the standard variables through getenv. on is false — and
// nothing is to be started — when neither endpoint variable is set, or
// the SDK or the trace exporter is switched off (OTEL_SDK_DISABLED=true,
// OTEL_TRACES_EXPORTER=none). A value this package cannot honour is an
// error naming the variable (wrapping ErrBadSetting).
func FromEnv(getenv func(string) string) (s Settings, on bool, err error) {
	val := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(val(EnvSDKDisabled), "true") {
		return s, false, nil
	}
	switch exp := strings.ToLower(val(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return s, false, nil
	default:
		return s, false, fmt.Errorf("%w: %s=%s: escapement exports spans over OTLP only (otlp or none)", ErrBadSetting, EnvTracesExporter, exp)
	}
	if val(EnvTracesEndpoint) == "" && val(EnvEndpoint) == "" {
		return s, false, nil
	}
	name, proto := EnvTracesProtocol, val(EnvTracesProtocol)
	if proto == "" {
		name, proto = EnvProtocol, val(EnvProtocol)
	}
	switch strings.ToLower(proto) {
	case "", ProtocolHTTP:
		s.Protocol = ProtocolHTTP
	case ProtocolGRPC:
		s.Protocol = ProtocolGRPC
	default:
		return s, false, fmt.Errorf("%w: %s=%s: want %s or %s", ErrBadSetting, name, proto, ProtocolHTTP, ProtocolGRPC)
	}
	switch c := strings.ToLower(val(EnvCaptureContent)); c {
	case "", "false", "no_content":
	case "true", "span_only", "span_and_event":
		s.Content = true
	case "event_only":
		return s, false, fmt.Errorf("%w: %s=%s: escapement records content on spans only (true or span_only)", ErrBadSetting, EnvCaptureContent, c)
	default:
		return s, false, fmt.Errorf("%w: %s=%s: want true or false (or span_only, no_content)", ErrBadSetting, EnvCaptureContent, c)
	}
	return s, true, nil
}
