// Package archtest holds tests of the repository's architecture: rules about
// which package may name what, checked over the source so that a change
// breaking one fails CI instead of waiting for the next review. It has no
// code of its own.
package archtest
