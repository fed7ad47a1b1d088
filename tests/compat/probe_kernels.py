"""Small KTIR kernels written for the compat tests (the ktir-examples kernels are read from the
corpus)."""

from __future__ import annotations


def _store_scalar(value: str, index: int) -> str:
    return f"""
    %t{index} = tensor.splat {value} : tensor<1xf32>
    %a{index} = ktdp.construct_access_tile %out[%c{index}] {{
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)>
    }} : memref<4xf32> -> !ktdp.access_tile<1xindex>
    ktdp.store %t{index}, %a{index} : tensor<1xf32>, !ktdp.access_tile<1xindex>"""


#: @probe(%x_ptr: index, %out_ptr: index, %n: index, %s: f32) stores, as f32, the value its
#: pointer argument %x_ptr received, %n, %s and x[0] (an f16 read through %x_ptr) in out[0..3]
PROBE = """module {
  func.func @probe(%x_ptr: index, %out_ptr: index, %n: index, %s: f32) attributes {grid = [1]} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %out = ktdp.construct_memory_view %out_ptr, sizes: [4], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 3 >= 0)>,
      memory_space = #ktdp.memory_space<global>
    } : memref<4xf32>
    %x = ktdp.construct_memory_view %x_ptr, sizes: [1], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 >= 0)>,
      memory_space = #ktdp.memory_space<global>
    } : memref<1xf16>
    %xa = ktdp.construct_access_tile %x[%c0] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<1xf16> -> !ktdp.access_tile<1xindex>
    %x0 = ktdp.load %xa : !ktdp.access_tile<1xindex> -> tensor<1xf16>
    %x0f = arith.extf %x0 : tensor<1xf16> to tensor<1xf32>
    %pi = arith.index_cast %x_ptr : index to i64
    %pf = arith.sitofp %pi : i64 to f32
    %ni = arith.index_cast %n : index to i64
    %nf = arith.sitofp %ni : i64 to f32""" + _store_scalar("%pf", 0) + _store_scalar("%nf", 1) \
    + _store_scalar("%s", 2) + """
    %a3 = ktdp.construct_access_tile %out[%c3] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<4xf32> -> !ktdp.access_tile<1xindex>
    ktdp.store %x0f, %a3 : tensor<1xf32>, !ktdp.access_tile<1xindex>
    return
  }
}
"""
