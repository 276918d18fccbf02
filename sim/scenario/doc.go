// Package scenario is the simulator's scenario format (docs/scenarios.md):
// the Scenario value — scripts for the models, tool behaviours, faults,
// user inputs, the order of same-instant events, expectations — its YAML
// decoder with file:line:col errors, its validation, and its canonical
// YAML (the bytes a trace header embeds, so a trace hash depends on them).
//
// The struct tags of scenario.go are the format: format.go reads them into
// a plan that the decoder (decode.go), the validation (validate.go) and the
// canonical writer (yaml.go) share, so a field is declared once. Adding a
// field to the format is adding a tagged field here (docs/development.md,
// "Adding a scenario field"); the engine (package sim) reads it, and the
// oracle (sim/oracle) judges what a run of it did.
//
// Load, LoadFile, LoadPaths and LoadFS read scenarios; a program can also
// build one in code (FillDefaults gives it the format's defaults) or draw
// random ones with sim/gen.
package scenario
