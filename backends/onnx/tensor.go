package onnx

import (
	"errors"
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// DType is a tensor element type.
type DType int

// The element types modeld's pipelines exchange with models.
const (
	DTypeUnsupported DType = iota
	Float32
	Int64
	Bool
)

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	}
	return "unsupported"
}

func dtypeOf(t ort.TensorElementDataType) DType {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return Float32
	case ort.TensorElementDataTypeInt64:
		return Int64
	case ort.TensorElementDataTypeBool:
		return Bool
	}
	return DTypeUnsupported
}

// Tensor is a dense row-major tensor in Go memory holding exactly one of F32, I64
// or B (the non-nil one; an empty tensor holds an empty, non-nil slice).
type Tensor struct {
	Shape []int64
	F32   []float32
	I64   []int64
	B     []bool
}

// NewFloat32 wraps data (not copied) as a float32 tensor.
func NewFloat32(data []float32, shape ...int64) *Tensor {
	return &Tensor{Shape: shape, F32: nonNil(data)}
}

// NewInt64 wraps data (not copied) as an int64 tensor.
func NewInt64(data []int64, shape ...int64) *Tensor { return &Tensor{Shape: shape, I64: nonNil(data)} }

// NewBool wraps data (not copied) as a bool tensor.
func NewBool(data []bool, shape ...int64) *Tensor { return &Tensor{Shape: shape, B: nonNil(data)} }

// Type is the element type held.
func (t *Tensor) Type() DType {
	switch {
	case t.F32 != nil:
		return Float32
	case t.I64 != nil:
		return Int64
	case t.B != nil:
		return Bool
	}
	return DTypeUnsupported
}

// Len is the element count the shape implies.
func (t *Tensor) Len() int {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return int(n)
}

func (t *Tensor) dataLen() int {
	switch t.Type() {
	case Float32:
		return len(t.F32)
	case Int64:
		return len(t.I64)
	case Bool:
		return len(t.B)
	}
	return 0
}

func (t *Tensor) validate() error {
	set := 0
	if t.F32 != nil {
		set++
	}
	if t.I64 != nil {
		set++
	}
	if t.B != nil {
		set++
	}
	if set != 1 {
		return errors.New("a tensor must hold exactly one data slice")
	}
	if len(t.Shape) == 0 {
		return errors.New("scalar tensors are not supported; use shape [1]")
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", t.Shape)
		}
	}
	if t.Len() != t.dataLen() {
		return fmt.Errorf("shape %v needs %d elements, got %d", t.Shape, t.Len(), t.dataLen())
	}
	return nil
}

// value makes an ORT value over the tensor's Go memory (not copied); the memory must
// stay untouched until the value is destroyed.
func (t *Tensor) value() (ort.Value, error) {
	shape := ort.NewShape(t.Shape...)
	switch t.Type() {
	case Float32:
		return ort.NewTensor(shape, t.F32)
	case Int64:
		return ort.NewTensor(shape, t.I64)
	case Bool:
		return ort.NewTensor(shape, t.B)
	}
	return nil, errors.New("unsupported tensor type")
}

// fromValue takes an ORT output's data. onnxruntime_go has already copied ORT's
// buffer into a Go slice, which stays valid after the value is destroyed.
func fromValue(v ort.Value) (*Tensor, error) {
	shape := []int64(v.GetShape())
	switch x := v.(type) {
	case *ort.Tensor[float32]:
		return &Tensor{Shape: shape, F32: nonNil(x.GetData())}, nil
	case *ort.Tensor[int64]:
		return &Tensor{Shape: shape, I64: nonNil(x.GetData())}, nil
	case *ort.Tensor[bool]:
		return &Tensor{Shape: shape, B: nonNil(x.GetData())}, nil
	}
	return nil, fmt.Errorf("unsupported output element type %v", ort.TensorElementDataType(v.DataType()))
}

// nonNil keeps an empty result typed (Type looks at which slice is non-nil).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
