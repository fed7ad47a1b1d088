module {
  func.func @ktir_prefill_tiny_mha_n5_l0_rope_k(%x: index, %cos: index, %sin: index, %out: index) attributes {grid = [7, 1]} {
    %c16 = arith.constant 16 : index
    %c4 = arith.constant 4 : index
    %c7 = arith.constant 7 : index
    %c8 = arith.constant 8 : index
    %c0 = arith.constant 0 : index
    %view1 = ktdp.construct_memory_view %x, sizes: [28, 16], strides: [16, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 27 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<28x16xf16>
    %view2 = ktdp.construct_memory_view %cos, sizes: [112], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 111 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<112xf16>
    %view3 = ktdp.construct_memory_view %sin, sizes: [112], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 111 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<112xf16>
    %view4 = ktdp.construct_memory_view %out, sizes: [28, 16], strides: [16, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 27 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<28x16xf16>
    %core5 = ktdp.get_compute_tile_id : index
    scf.for %iv6 = %core5 to %c7 step %c7 {
      %i7 = arith.muli %iv6, %c4 : index
      %tile8 = ktdp.construct_access_tile %view1[%i7, %c0] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<28x16xf16> -> !ktdp.access_tile<4x8xindex>
      %v9 = ktdp.load %tile8 : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>
      %f10 = arith.extf %v9 : tensor<4x8xf16> to tensor<4x8xf32>
      %tile11 = ktdp.construct_access_tile %view1[%i7, %c8] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<28x16xf16> -> !ktdp.access_tile<4x8xindex>
      %v12 = ktdp.load %tile11 : !ktdp.access_tile<4x8xindex> -> tensor<4x8xf16>
      %f13 = arith.extf %v12 : tensor<4x8xf16> to tensor<4x8xf32>
      %i14 = arith.muli %iv6, %c16 : index
      %tile15 = ktdp.construct_access_tile %view2[%i14] {
        access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 7 >= 0)>,
        access_tile_order = affine_map<(d0) -> (d0)>
      } : memref<112xf16> -> !ktdp.access_tile<8xindex>
      %v16 = ktdp.load %tile15 : !ktdp.access_tile<8xindex> -> tensor<8xf16>
      %f17 = arith.extf %v16 : tensor<8xf16> to tensor<8xf32>
      %empty18 = tensor.empty() : tensor<4x8xf32>
      %bc19 = linalg.broadcast ins(%f17 : tensor<8xf32>) outs(%empty18 : tensor<4x8xf32>) dimensions = [0]
      %i20 = arith.muli %iv6, %c16 : index
      %i21 = arith.addi %i20, %c8 : index
      %tile22 = ktdp.construct_access_tile %view2[%i21] {
        access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 7 >= 0)>,
        access_tile_order = affine_map<(d0) -> (d0)>
      } : memref<112xf16> -> !ktdp.access_tile<8xindex>
      %v23 = ktdp.load %tile22 : !ktdp.access_tile<8xindex> -> tensor<8xf16>
      %f24 = arith.extf %v23 : tensor<8xf16> to tensor<8xf32>
      %empty25 = tensor.empty() : tensor<4x8xf32>
      %bc26 = linalg.broadcast ins(%f24 : tensor<8xf32>) outs(%empty25 : tensor<4x8xf32>) dimensions = [0]
      %i27 = arith.muli %iv6, %c16 : index
      %tile28 = ktdp.construct_access_tile %view3[%i27] {
        access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 7 >= 0)>,
        access_tile_order = affine_map<(d0) -> (d0)>
      } : memref<112xf16> -> !ktdp.access_tile<8xindex>
      %v29 = ktdp.load %tile28 : !ktdp.access_tile<8xindex> -> tensor<8xf16>
      %f30 = arith.extf %v29 : tensor<8xf16> to tensor<8xf32>
      %empty31 = tensor.empty() : tensor<4x8xf32>
      %bc32 = linalg.broadcast ins(%f30 : tensor<8xf32>) outs(%empty31 : tensor<4x8xf32>) dimensions = [0]
      %i33 = arith.muli %iv6, %c16 : index
      %i34 = arith.addi %i33, %c8 : index
      %tile35 = ktdp.construct_access_tile %view3[%i34] {
        access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 7 >= 0)>,
        access_tile_order = affine_map<(d0) -> (d0)>
      } : memref<112xf16> -> !ktdp.access_tile<8xindex>
      %v36 = ktdp.load %tile35 : !ktdp.access_tile<8xindex> -> tensor<8xf16>
      %f37 = arith.extf %v36 : tensor<8xf16> to tensor<8xf32>
      %empty38 = tensor.empty() : tensor<4x8xf32>
      %bc39 = linalg.broadcast ins(%f37 : tensor<8xf32>) outs(%empty38 : tensor<4x8xf32>) dimensions = [0]
      %e40 = arith.mulf %f10, %bc19 : tensor<4x8xf32>
      %e41 = arith.mulf %f13, %bc32 : tensor<4x8xf32>
      %e42 = arith.subf %e40, %e41 : tensor<4x8xf32>
      %e43 = arith.mulf %f13, %bc26 : tensor<4x8xf32>
      %e44 = arith.mulf %f10, %bc39 : tensor<4x8xf32>
      %e45 = arith.addf %e43, %e44 : tensor<4x8xf32>
      %i46 = arith.muli %iv6, %c4 : index
      %h47 = arith.truncf %e42 : tensor<4x8xf32> to tensor<4x8xf16>
      %tile48 = ktdp.construct_access_tile %view4[%i46, %c0] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<28x16xf16> -> !ktdp.access_tile<4x8xindex>
      ktdp.store %h47, %tile48 : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>
      %h49 = arith.truncf %e45 : tensor<4x8xf32> to tensor<4x8xf16>
      %tile50 = ktdp.construct_access_tile %view4[%i46, %c8] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 3 >= 0, d1 >= 0, -d1 + 7 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<28x16xf16> -> !ktdp.access_tile<4x8xindex>
      ktdp.store %h49, %tile50 : tensor<4x8xf16>, !ktdp.access_tile<4x8xindex>
      scf.yield
    }
    return
  }
}
