package evidence

import (
	"bufio"
	"fmt"
	"strings"
)

// ContractCheck is one table of the contract (docs/SPEC.md, docs/semantics.md)
// compared with the value package protocol encodes, which the model and the
// server share and a differential run therefore cannot check.
type ContractCheck struct {
	// Table names what was compared ("retryable failure codes").
	Table string `json:"table"`
	// Source cites the contract's line ("docs/SPEC.md:106").
	Source string `json:"source"`
	// Contract is what the text states, in short.
	Contract string `json:"contract"`
	Passed   bool   `json:"passed"`
	// Detail lists the differences, or why the text could not be read.
	Detail string `json:"detail,omitempty"`
}

// ContractSource is the Source of a failure of the contract check.
const ContractSource = "contract"

// mdContract writes the contract tables' section; a card without the check
// (written before it existed, or by a command that does not run it) has none.
func mdContract(w *bufio.Writer, c Card) error {
	if len(c.Contract) == 0 {
		return nil
	}
	fmt.Fprint(w, "\n## Contract tables\n\n")
	fmt.Fprint(w, "protocol's tables, which the model and the server share, compared with the contract's own text.\n\n")
	rows := make([][]string, 0, len(c.Contract))
	for _, k := range c.Contract {
		rows = append(rows, []string{k.Table, code(k.Source), k.Contract, verdict(k.Passed)})
	}
	if err := mdTable(w, []string{"Table", "Stated at", "The contract says", "Verdict"}, rows); err != nil {
		return fmt.Errorf("contract table: %w", err)
	}
	return nil
}

// mdTokens says how many offered commit tokens each campaign checked
// against the contract's form and for repeats; nothing when none did.
func mdTokens(w *bufio.Writer, c Card) {
	var parts []string
	for _, cp := range c.Campaigns {
		if cp.TokensChecked > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", cp.Name, cp.TokensChecked))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "\nCommit tokens offered, each checked for the contract's length and alphabet and for a repeat "+
			"across the campaign: %s.\n", strings.Join(parts, ", "))
	}
}
