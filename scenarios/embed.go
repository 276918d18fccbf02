// Package scenarios embeds the built-in scenario suite, so `escapement sim`
// with no arguments runs it from the binary alone.
package scenarios

import "embed"

// FS holds every *.yaml file of this directory.
//
//go:embed *.yaml
var FS embed.FS
