package main

import (
	"encoding/json"
	"os"

	"github.com/rendermac/rendermac/harness/mutate"
)

func main() { _ = json.NewEncoder(os.Stdout).Encode(mutate.Catalogue) }
