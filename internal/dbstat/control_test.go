package dbstat

import "testing"

func TestControlReadsTheFirstWord(t *testing.T) {
	for sql, want := range map[string]string{
		"begin":                                  "begin",
		"  BEGIN ISOLATION LEVEL READ COMMITTED": "begin",
		"begin;":                                 "begin",
		"commit\n":                               "commit",
		"Rollback":                               "rollback",
		"beginning":                              "",
		"SELECT 1":                               "",
		"commi":                                  "",
		"":                                       "",
		"\nUPDATE jobs SET status = $1":          "",
	} {
		if got := control(sql); got != want {
			t.Errorf("control(%q) = %q, want %q", sql, got, want)
		}
	}
}
