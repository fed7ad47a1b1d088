module {
  func.func @ktir_prefill_tiny_mha_n2_l0_k_proj(%x: index, %w: index, %out: index) attributes {grid = [1, 1]} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c1 = arith.constant 1 : index
    %view1 = ktdp.construct_memory_view %x, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view2 = ktdp.construct_memory_view %w, sizes: [64, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<64x64xf16>
    %view3 = ktdp.construct_memory_view %out, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %core4 = ktdp.get_compute_tile_id : index
    scf.for %iv5 = %core4 to %c1 step %c1 {
      %i6 = arith.muli %iv5, %c64 : index
      %k7 = arith.constant dense<0.000000000e+00> : tensor<7x64xf32>
      %loop9 = scf.for %iv8 = %c0 to %c64 step %c64 iter_args(%acc10 = %k7) -> (tensor<7x64xf32>) {
        %tile11 = ktdp.construct_access_tile %view1[%c0, %iv8] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
        %v12 = ktdp.load %tile11 : !ktdp.access_tile<7x64xindex> -> tensor<7x64xf16>
        %tile13 = ktdp.construct_access_tile %view2[%i6, %iv8] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<64x64xf16> -> !ktdp.access_tile<64x64xindex>
        %v14 = ktdp.load %tile13 : !ktdp.access_tile<64x64xindex> -> tensor<64x64xf16>
        %mm15 = linalg.matmul_transpose_b ins(%v12, %v14 : tensor<7x64xf16>, tensor<64x64xf16>) outs(%acc10 : tensor<7x64xf32>) -> tensor<7x64xf32>
        scf.yield %mm15 : tensor<7x64xf32>
      }
      %h16 = arith.truncf %loop9 : tensor<7x64xf32> to tensor<7x64xf16>
      %tile17 = ktdp.construct_access_tile %view3[%c0, %i6] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
      ktdp.store %h16, %tile17 : tensor<7x64xf16>, !ktdp.access_tile<7x64xindex>
      scf.yield
    }
    return
  }
}
