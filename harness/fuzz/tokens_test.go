package fuzz

import (
	"context"
	"strings"
	"testing"
)

var testTokenRule = TokenRule{Len: 32, Alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"}

func TestCampaignChecksOfferedTokens(t *testing.T) {
	// 16 seeds: a seed offers 0-10 tokens in 100 steps, so 4 seeds'
	// total moves with every change of the generator's weights.
	seeds := make([]uint64, 16)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	c := Campaign{Factory: modelFactory(""), Gen: DefaultGenConfig, Seeds: seeds, Steps: 100, Tokens: &testTokenRule}
	res, err := c.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.TokensChecked < 40 || len(res.TokenProblems) != 0 {
		t.Fatalf("want many tokens checked and no problem, got %d, %v", res.TokensChecked, res.TokenProblems)
	}
}

func TestCheckTokensReportsFormAndRepeats(t *testing.T) {
	good, other := strings.Repeat("A", 32), strings.Repeat("b", 32)
	results := []RunResult{
		{Offers: []Offer{{Step: 3, Token: good}, {Step: 5, Token: strings.Repeat("A", 31)}}},
		{Offers: []Offer{{Step: 1, Token: other}, {Step: 2, Token: strings.Repeat("+", 32)}, {Step: 7, Token: good}}},
	}
	n, ps := checkTokens(testTokenRule, []uint64{10, 11}, results)
	if n != 5 || len(ps) != 3 {
		t.Fatalf("want 5 checked and 3 problems, got %d: %+v", n, ps)
	}
	if ps[0].Seed != 10 || ps[0].Step != 5 || !strings.Contains(ps[0].Detail, "31 characters") {
		t.Errorf("short token: %+v", ps[0])
	}
	if ps[1].Seed != 11 || !strings.Contains(ps[1].Detail, "outside the contract's alphabet") {
		t.Errorf("alphabet: %+v", ps[1])
	}
	if p := ps[2]; !p.Repeat || p.Seed != 11 || p.Step != 7 || p.FirstSeed != 10 || p.FirstStep != 3 {
		t.Errorf("repeat across seeds: %+v", p)
	}
}
