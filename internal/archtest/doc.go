// Package archtest holds tests of the repository's architecture: rules about
// which package may name or link what (the doors link the root contract and
// neutral helpers, never a service, the store or the model SDKs; only app
// and store/… name desk.Store), checked over the source so that a change
// breaking one fails CI instead of waiting for the next review. It has no
// code of its own.
package archtest
