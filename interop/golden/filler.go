package main

// The fuzzer library, whichever one the minor's apimachinery uses.
//
// apimachinery's apitesting/fuzzer hands out a github.com/google/gofuzz Fuzzer up to
// kube 1.32 and a sigs.k8s.io/randfill Filler from 1.33: the same library renamed
// (Fuzz became Fill, RandBool Bool, RandString String(0)), and each insists that a
// custom function's second argument is its own Continue type. So that one program
// builds against every minor's modules, the golden fuzzer functions are written
// against cont, and adapt turns them into functions of whichever Continue type
// apimachinery's own meta fuzzer functions take, found by reflection. The calls
// reach the library unchanged, so a seed fills the same objects as when these
// functions used gofuzz directly.

import (
	"fmt"
	"reflect"
)

// cont is the part of the library's Continue the golden fuzzer functions use.
type cont struct{ v reflect.Value }

// lib names the methods of one library: of its Continue and of its Fuzzer/Filler.
type lib struct {
	fill, fillNoCustom, randBool, randString string
	// randStringArgs are the arguments of randString (randfill's String takes a
	// maximum length, 0 for the default range).
	randStringArgs []reflect.Value
}

var (
	gofuzz   = lib{"Fuzz", "FuzzNoCustom", "RandBool", "RandString", nil}
	randfill = lib{"Fill", "FillNoCustom", "Bool", "String", []reflect.Value{reflect.ValueOf(0)}}
	// used is the library of the Continue type adapt was given.
	used lib
)

func (c cont) call(name string, args ...reflect.Value) []reflect.Value {
	return c.v.MethodByName(name).Call(args)
}

// The methods keep gofuzz's names, which these functions were first written with.

func (c cont) Fuzz(obj any)         { c.call(used.fill, reflect.ValueOf(obj)) }
func (c cont) FuzzNoCustom(obj any) { c.call(used.fillNoCustom, reflect.ValueOf(obj)) }
func (c cont) RandBool() bool       { return c.call(used.randBool)[0].Bool() }
func (c cont) RandString() string   { return c.call(used.randString, used.randStringArgs...)[0].String() }

func (c cont) Intn(n int) int       { return int(c.call("Intn", reflect.ValueOf(n))[0].Int()) }
func (c cont) Int63n(n int64) int64 { return c.call("Int63n", reflect.ValueOf(n))[0].Int() }
func (c cont) Float64() float64     { return c.call("Float64")[0].Float() }

// continueType is the Continue type of the library apimachinery's fuzzer uses: the
// second argument of its meta fuzzer functions.
func continueType(funcs []any) (reflect.Type, error) {
	for _, f := range funcs {
		t := reflect.TypeOf(f)
		if t.Kind() == reflect.Func && t.NumIn() == 2 {
			return t.In(1), nil
		}
	}
	return nil, fmt.Errorf("no fuzzer function with two arguments among apimachinery's meta fuzzer functions")
}

// adapt turns functions func(*T, cont) into func(*T, C) for the library's Continue
// type C, and records which library that is.
func adapt(c reflect.Type, funcs []any) ([]any, error) {
	switch {
	case c.PkgPath() == "github.com/google/gofuzz" && c.Name() == "Continue":
		used = gofuzz
	case c.PkgPath() == "sigs.k8s.io/randfill" && c.Name() == "Continue":
		used = randfill
	default:
		return nil, fmt.Errorf("fuzzer functions take a %v, neither gofuzz's nor randfill's Continue", c)
	}
	contType := reflect.TypeOf(cont{})
	out := make([]any, len(funcs))
	for i, f := range funcs {
		fv := reflect.ValueOf(f)
		ft := fv.Type()
		if ft.Kind() != reflect.Func || ft.NumIn() != 2 || ft.In(1) != contType || ft.NumOut() != 0 {
			return nil, fmt.Errorf("golden fuzzer function %d is a %v, not a func(*T, cont)", i, ft)
		}
		wrapped := reflect.FuncOf([]reflect.Type{ft.In(0), c}, nil, false)
		out[i] = reflect.MakeFunc(wrapped, func(args []reflect.Value) []reflect.Value {
			return fv.Call([]reflect.Value{args[0], reflect.ValueOf(cont{args[1]})})
		}).Interface()
	}
	return out, nil
}

// fillWith returns the Fuzz or Fill method of what apimachinery's FuzzerFor returned
// (a *fuzz.Fuzzer or a *randfill.Filler).
func fillWith(f any) func(obj any) {
	m := reflect.ValueOf(f).MethodByName(used.fill)
	return func(obj any) { m.Call([]reflect.Value{reflect.ValueOf(obj)}) }
}
