// Package archtest holds the tests that keep desk's layering: the doors
// (httpapi, web, mcpserver) link the root contract and neutral helpers,
// never a service, the store or the model SDKs. It has no code of its
// own; the rules are its tests.
package archtest
