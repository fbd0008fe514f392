package desk

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"sync"
	"time"
)

// ID prefixes. An id is the prefix, an underscore and 26 characters of
// Crockford base32 encoding 48 bits of milliseconds and 80 random bits, so
// ids sort by creation time and are never reused.
const (
	PrefixWorkspace = "ws"
	PrefixActor     = "act"
	PrefixSession   = "ses"
	PrefixSurface   = "srf"
	PrefixExecution = "exe"
	PrefixArtifact  = "art"
	PrefixQueue     = "q"
	PrefixEpisode   = "epi"
	PrefixGroup     = "grp"
	PrefixItem      = "itm"
	PrefixToken     = "tok"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var idState struct {
	sync.Mutex
	lastMS int64
	last   [10]byte
}

// NewID returns a fresh id with the given prefix. Within one millisecond ids
// from this process increase monotonically, so ORDER BY id is creation order.
func NewID(prefix string) string {
	idState.Lock()
	ms := time.Now().UnixMilli()
	var r [10]byte
	if ms <= idState.lastMS {
		ms = idState.lastMS
		r = idState.last
		// Increment the 80-bit random part; overflow is astronomically unlikely.
		for i := len(r) - 1; i >= 0; i-- {
			r[i]++
			if r[i] != 0 {
				break
			}
		}
	} else {
		if _, err := rand.Read(r[:]); err != nil {
			panic("desk: crypto/rand failed: " + err.Error())
		}
		// Leave headroom so increments within one millisecond never wrap.
		r[0] &= 0x7f
	}
	idState.lastMS, idState.last = ms, r
	idState.Unlock()

	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(ms)<<16)
	copy(b[6:], r[:])
	return prefix + "_" + encode128(b)
}

// encode128 encodes 128 bits as 26 Crockford base32 characters (the first
// character carries only 3 bits).
func encode128(b [16]byte) string {
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	var out [26]byte
	for i := 25; i >= 0; i-- {
		out[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out[:])
}

// HasPrefix reports whether id is well formed for the given prefix. It
// checks shape only, so handlers can refuse garbage before a store lookup.
func HasPrefix(id, prefix string) bool {
	if prefix == PrefixWorkspace && id == ManagerWorkspaceID {
		// The one workspace id that is not generated: the reserved
		// workspace manager's.
		return true
	}
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(crockford, rest[i]) < 0 {
			return false
		}
	}
	return true
}

var (
	sigAdjectives = []string{
		"calm", "amber", "brisk", "clear", "deep", "eager", "faint", "gentle", "golden", "hidden",
		"keen", "lively", "misty", "noble", "quiet", "rapid", "silent", "steady", "sunny", "swift",
		"tidy", "vivid", "warm", "wild", "young", "bold", "bright", "cool", "dusky", "fresh",
		"hazy", "lucky", "mellow", "proud", "rosy", "shy", "sly", "stark", "tame", "wise",
	}
	sigNouns = []string{
		"river", "forest", "meadow", "harbor", "canyon", "valley", "island", "summit", "glacier", "delta",
		"prairie", "lagoon", "orchard", "grove", "ridge", "shore", "brook", "cove", "dune", "field",
		"garden", "hill", "lake", "marsh", "mesa", "oasis", "pine", "reef", "spring", "stone",
	}
)

// NewSignature returns a readable session signature such as
// "@calm-amber-river-a1b2c3". It is for people and logs; the id stays the key.
func NewSignature() string {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		panic("desk: crypto/rand failed: " + err.Error())
	}
	a := sigAdjectives[int(r[0])%len(sigAdjectives)]
	b := sigAdjectives[int(r[1])%len(sigAdjectives)]
	n := sigNouns[int(r[2])%len(sigNouns)]
	return "@" + a + "-" + b + "-" + n + "-" + hex.EncodeToString(r[3:6])
}
