module {
  func.func @ktir_prefill_tiny_mha_n10_l0_down_proj(%x: index, %w: index, %res: index, %out: index) attributes {grid = [1, 1]} {
    %c128 = arith.constant 128 : index
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c1 = arith.constant 1 : index
    %view1 = ktdp.construct_memory_view %x, sizes: [7, 128], strides: [128, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 127 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x128xf16>
    %view2 = ktdp.construct_memory_view %w, sizes: [64, 128], strides: [128, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 127 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<64x128xf16>
    %view3 = ktdp.construct_memory_view %res, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view4 = ktdp.construct_memory_view %out, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %core5 = ktdp.get_compute_tile_id : index
    scf.for %iv6 = %core5 to %c1 step %c1 {
      %i7 = arith.muli %iv6, %c64 : index
      %k8 = arith.constant dense<0.000000000e+00> : tensor<7x64xf32>
      %loop10 = scf.for %iv9 = %c0 to %c128 step %c128 iter_args(%acc11 = %k8) -> (tensor<7x64xf32>) {
        %tile12 = ktdp.construct_access_tile %view1[%c0, %iv9] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 127 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<7x128xf16> -> !ktdp.access_tile<7x128xindex>
        %v13 = ktdp.load %tile12 : !ktdp.access_tile<7x128xindex> -> tensor<7x128xf16>
        %tile14 = ktdp.construct_access_tile %view2[%i7, %iv9] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 127 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<64x128xf16> -> !ktdp.access_tile<64x128xindex>
        %v15 = ktdp.load %tile14 : !ktdp.access_tile<64x128xindex> -> tensor<64x128xf16>
        %mm16 = linalg.matmul_transpose_b ins(%v13, %v15 : tensor<7x128xf16>, tensor<64x128xf16>) outs(%acc11 : tensor<7x64xf32>) -> tensor<7x64xf32>
        scf.yield %mm16 : tensor<7x64xf32>
      }
      %tile17 = ktdp.construct_access_tile %view3[%c0, %i7] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
      %v18 = ktdp.load %tile17 : !ktdp.access_tile<7x64xindex> -> tensor<7x64xf16>
      %f19 = arith.extf %v18 : tensor<7x64xf16> to tensor<7x64xf32>
      %e20 = arith.addf %loop10, %f19 : tensor<7x64xf32>
      %h21 = arith.truncf %e20 : tensor<7x64xf32> to tensor<7x64xf16>
      %tile22 = ktdp.construct_access_tile %view4[%c0, %i7] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
      ktdp.store %h21, %tile22 : tensor<7x64xf16>, !ktdp.access_tile<7x64xindex>
      scf.yield
    }
    return
  }
}
