package fuzz

import "github.com/rendermac/rendermac/protocol"

// RandomIDs is protocol.RandomIDs over seeded ChaCha8 streams.
type RandomIDs = protocol.RandomIDs
