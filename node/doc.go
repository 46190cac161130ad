// Package node wires one leapcount node together: the counter store, the HTTP and RESP
// front ends, metrics and the background sweep. It is the one place that knows every
// other package; cmd/node only turns flags into a Config and handles signals.
package node
