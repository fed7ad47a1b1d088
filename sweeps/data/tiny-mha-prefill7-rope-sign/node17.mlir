module {
  func.func @ktir_prefill_tiny_mha_n17_l1_attention(%q: index, %k_cache: index, %v_cache: index, %mask: index, %out: index) attributes {grid = [4, 1]} {
    %c16 = arith.constant 16 : index
    %c4 = arith.constant 4 : index
    %c0 = arith.constant 0 : index
    %view1 = ktdp.construct_memory_view %q, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view2 = ktdp.construct_memory_view %k_cache, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view3 = ktdp.construct_memory_view %v_cache, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view4 = ktdp.construct_memory_view %mask, sizes: [7, 7], strides: [7, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 6 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x7xf16>
    %view5 = ktdp.construct_memory_view %out, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %core6 = ktdp.get_compute_tile_id : index
    scf.for %iv7 = %core6 to %c4 step %c4 {
      %i8 = arith.muli %iv7, %c16 : index
      %i9 = arith.muli %iv7, %c16 : index
      %tile10 = ktdp.construct_access_tile %view2[%c0, %i9] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x16xindex>
      %v11 = ktdp.load %tile10 : !ktdp.access_tile<7x16xindex> -> tensor<7x16xf16>
      %tile12 = ktdp.construct_access_tile %view3[%c0, %i9] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x16xindex>
      %v13 = ktdp.load %tile12 : !ktdp.access_tile<7x16xindex> -> tensor<7x16xf16>
      %tile14 = ktdp.construct_access_tile %view1[%c0, %i8] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x16xindex>
      %v15 = ktdp.load %tile14 : !ktdp.access_tile<7x16xindex> -> tensor<7x16xf16>
      %causal16 = arith.constant dense<[[0.000000000e+00, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, 0.000000000e+00, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, -6.550400000e+04, -6.550400000e+04, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, -6.550400000e+04, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, -6.550400000e+04], [0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00, 0.000000000e+00]]> : tensor<7x7xf32>
      %k17 = arith.constant dense<0.000000000e+00> : tensor<7x7xf32>
      %mm18 = linalg.matmul_transpose_b ins(%v15, %v11 : tensor<7x16xf16>, tensor<7x16xf16>) outs(%k17 : tensor<7x7xf32>) -> tensor<7x7xf32>
      %k19 = arith.constant dense<2.500000000e-01> : tensor<7x7xf32>
      %e20 = arith.mulf %mm18, %k19 : tensor<7x7xf32>
      %e21 = arith.addf %e20, %causal16 : tensor<7x7xf32>
      %k22 = arith.constant dense<-3.000000005e+38> : tensor<7xf32>
      %k23 = arith.constant dense<-3.000000005e+38> : tensor<7xf32>
      %red24 = linalg.reduce { arith.maximumf }
        ins(%e21 : tensor<7x7xf32>)
        outs(%k23 : tensor<7xf32>)
        dimensions = [1]
      %e25 = arith.maximumf %k22, %red24 : tensor<7xf32>
      %k26 = arith.constant dense<0.000000000e+00> : tensor<7xf32>
      %k27 = arith.constant dense<0.000000000e+00> : tensor<7x16xf32>
      %empty28 = tensor.empty() : tensor<7x7xf32>
      %bc29 = linalg.broadcast ins(%e25 : tensor<7xf32>) outs(%empty28 : tensor<7x7xf32>) dimensions = [1]
      %e30 = arith.subf %e21, %bc29 : tensor<7x7xf32>
      %e31 = math.exp %e30 : tensor<7x7xf32>
      %k32 = arith.constant dense<0.000000000e+00> : tensor<7xf32>
      %red33 = linalg.reduce { arith.addf }
        ins(%e31 : tensor<7x7xf32>)
        outs(%k32 : tensor<7xf32>)
        dimensions = [1]
      %e34 = arith.addf %k26, %red33 : tensor<7xf32>
      %mm35 = linalg.matmul ins(%e31, %v13 : tensor<7x7xf32>, tensor<7x16xf16>) outs(%k27 : tensor<7x16xf32>) -> tensor<7x16xf32>
      %empty36 = tensor.empty() : tensor<7x16xf32>
      %bc37 = linalg.broadcast ins(%e34 : tensor<7xf32>) outs(%empty36 : tensor<7x16xf32>) dimensions = [1]
      %e38 = arith.divf %mm35, %bc37 : tensor<7x16xf32>
      %h39 = arith.truncf %e38 : tensor<7x16xf32> to tensor<7x16xf16>
      %tile40 = ktdp.construct_access_tile %view5[%c0, %i8] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 15 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x16xindex>
      ktdp.store %h39, %tile40 : tensor<7x16xf16>, !ktdp.access_tile<7x16xindex>
      scf.yield
    }
    return
  }
}
