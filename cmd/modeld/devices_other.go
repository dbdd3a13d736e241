//go:build !linux

package main

// loadedCPUVariant cannot be read without /proc: the probe says so.
func loadedCPUVariant() string { return "" }
