//go:build !unix

package fsjail

// oNonblock is zero where FIFOs cannot block an open.
const oNonblock = 0
