//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// exitCPU needs /proc and waitid's WNOWAIT.
func exitCPU(*exec.Cmd) (float64, float64, error) { return 0, 0, errors.ErrUnsupported }

// hostCPU needs /proc.
func hostCPU(int) map[string]float64 { return nil }

// reapedCPU needs /proc.
func reapedCPU(int) map[string]float64 { return nil }

// openFiles needs /proc.
func openFiles(int) (uint64, error) { return 0, errors.ErrUnsupported }
