// Package junitdemo is the tiny package TestMakeTestWritesJUnit runs
// through `make test JUNIT=...`: one test that passes and one that fails on
// purpose. It sits under testdata, so ./... never runs it.
package junitdemo

import "testing"

func TestPasses(t *testing.T) {
	if 1+1 != 2 {
		t.Fatal("arithmetic")
	}
}

func TestFails(t *testing.T) {
	t.Error("fails on purpose: the JUnit report must record this failure")
}
