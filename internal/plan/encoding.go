package plan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Encode writes the plan as an executor reads it: Magic, u32 Version,
// u32 op count, then per op u32 code, u32 nints, u32 nstrs, nints u64,
// and nstrs strings of a u32 length and their bytes, all little-endian.
// It refuses what an executor would (Size), and allocates the encoding
// once, at its size.
func Encode(p *Plan) ([]byte, error) {
	n, err := Size(p)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, n)
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Ops)))
	for _, op := range p.Ops {
		b = binary.LittleEndian.AppendUint32(b, uint32(op.Code))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(op.Ints)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(op.Strs)))
		for _, v := range op.Ints {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		for _, s := range op.Strs {
			b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
			b = append(b, s...)
		}
	}
	return b, nil
}

// Size is the length of the plan's encoding, or why an executor would
// refuse it: an op whose counts its code does not allow, a string
// holding NUL, a plan over MaxOps or MaxBytes. It checks a plan's bounds
// without encoding it (nsinit's fits), and is Encode's only check.
func Size(p *Plan) (int, error) {
	if len(p.Ops) > MaxOps {
		return 0, fmt.Errorf("the plan has %d ops, over the executor's %d", len(p.Ops), MaxOps)
	}
	n := len(Magic) + 8
	for i, op := range p.Ops {
		if len(op.Ints) > MaxInts || len(op.Strs) > MaxStrs {
			return 0, fmt.Errorf("op %d (%s): %d ints and %d strings, over the executor's bounds", i, op.Code, len(op.Ints), len(op.Strs))
		}
		if err := op.Code.check(uint32(len(op.Ints)), uint32(len(op.Strs))); err != nil {
			return 0, fmt.Errorf("op %d (%s): %w", i, op.Context, err)
		}
		n += 12 + 8*len(op.Ints)
		for _, s := range op.Strs {
			if strings.IndexByte(s, 0) >= 0 {
				return 0, fmt.Errorf("op %d (%s): string %q holds a NUL byte", i, op.Context, s)
			}
			if len(s) > MaxBytes {
				return 0, fmt.Errorf("op %d (%s): a string of %d bytes, over the plan's %d", i, op.Context, len(s), MaxBytes)
			}
			n += 4 + len(s)
		}
		if n > MaxBytes {
			return 0, fmt.Errorf("the plan is over the executor's %d bytes at op %d", MaxBytes, i)
		}
	}
	return n, nil
}

// errShort is a plan that ends inside an op.
var errShort = errors.New("the plan ends early")

// reader reads an encoded plan, never past its end.
type reader struct {
	b   []byte
	off int
}

func (r *reader) u32() (uint32, error) {
	if len(r.b)-r.off < 4 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) u64() (uint64, error) {
	if len(r.b)-r.off < 8 {
		return 0, errShort
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

func (r *reader) str() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	if uint64(len(r.b)-r.off) < uint64(n) {
		return "", errShort
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	if strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("a string holds a NUL byte")
	}
	return s, nil
}

// Decode reads a plan as the C executor does, with the same checks; the
// ops it returns have no Context, which is never encoded. It is what the
// Go init applies, and what tests compare.
func Decode(b []byte) (*Plan, error) {
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("the plan has %d bytes, over %d", len(b), MaxBytes)
	}
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		return nil, errors.New("not a plan: no " + Magic + " magic")
	}
	r := &reader{b: b, off: len(Magic)}
	v, err := r.u32()
	if err != nil {
		return nil, err
	}
	if v != Version {
		return nil, fmt.Errorf("plan version %d, this executor reads %d", v, Version)
	}
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	if n > MaxOps {
		return nil, fmt.Errorf("the plan has %d ops, over %d", n, MaxOps)
	}
	p := &Plan{Ops: make([]Op, 0, n)}
	for i := uint32(0); i < n; i++ {
		op, err := r.op()
		if err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		p.Ops = append(p.Ops, op)
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("%d bytes follow the last op", len(b)-r.off)
	}
	return p, nil
}

func (r *reader) op() (Op, error) {
	var hdr [3]uint32
	for i := range hdr {
		v, err := r.u32()
		if err != nil {
			return Op{}, err
		}
		hdr[i] = v
	}
	op := Op{Code: Code(hdr[0])}
	if err := op.Code.check(hdr[1], hdr[2]); err != nil {
		return Op{}, err
	}
	if hdr[1] > 0 {
		op.Ints = make([]uint64, hdr[1])
	}
	for i := range op.Ints {
		v, err := r.u64()
		if err != nil {
			return Op{}, err
		}
		op.Ints[i] = v
	}
	if hdr[2] > 0 {
		op.Strs = make([]string, hdr[2])
	}
	for i := range op.Strs {
		s, err := r.str()
		if err != nil {
			return Op{}, err
		}
		op.Strs[i] = s
	}
	return op, nil
}
