package main

import (
	"fmt"
	"os"

	"github.com/rendermac/rendermac/protocol"
)

// loadCatalogue reads the service catalogue file given to the server and
// the agent ("": the built-in services).
func loadCatalogue(path string) ([]protocol.Service, error) {
	if path == "" {
		return protocol.Services, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--catalogue: %w", err)
	}
	cat, err := protocol.ParseCatalogue(data)
	if err != nil {
		return nil, fmt.Errorf("--catalogue %s: %w", path, err)
	}
	return cat, nil
}
