// Output shape inference for deltagen's custom ops whose outputs have an
// input's type and shape. Written against the C API: the C++ header's
// SetOutputShape marks symbolic dimensions in a way ORT 1.30 rejects (see
// matmul_nbits_op.cpp); handing the input's type-and-shape object back keeps
// the symbols.
#pragma once
#include <cstddef>
#include <initializer_list>
#include <utility>

#include <onnxruntime_cxx_api.h>

namespace deltagen::ortext {

// For each {input, output}: output gets the input's type and shape (inputs the
// node does not have, or without a shape, are skipped).
OrtStatusPtr pass_through_shapes(OrtShapeInferContext* context,
                                 std::initializer_list<std::pair<size_t, size_t>> input_to_output);

// Output `out` becomes a float tensor of input `in`'s shape with the last
// dimension `last_dim` (nothing when the input's rank is unknown). Throws
// Ort::Exception. Symbolic dimensions keep their names and dimensions ORT
// knows nothing about get fresh ones: handed back as -1 they would become a
// literal size downstream.
void set_float_shape_with_last_dim(OrtShapeInferContext* context, size_t in, size_t out, int64_t last_dim);

// The node's attribute `name`, or null when the node does not set it.
const OrtOpAttr* optional_attribute(OrtShapeInferContext* context, const char* name);
// An int attribute's value, or an int list's first `count` values (throws
// Ort::Exception when it holds anything else).
int64_t int_attribute(const OrtOpAttr* attr);
void ints_attribute(const OrtOpAttr* attr, int64_t* values, size_t count);

}  // namespace deltagen::ortext
