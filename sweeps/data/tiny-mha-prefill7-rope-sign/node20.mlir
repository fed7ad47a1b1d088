module {
  func.func @ktir_prefill_tiny_mha_n20_l1_gate_up_silu(%x: index, %gate: index, %up: index, %out: index) attributes {grid = [2, 1]} {
    %c0 = arith.constant 0 : index
    %c64 = arith.constant 64 : index
    %c2 = arith.constant 2 : index
    %view1 = ktdp.construct_memory_view %x, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view2 = ktdp.construct_memory_view %gate, sizes: [128, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 127 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<128x64xf16>
    %view3 = ktdp.construct_memory_view %up, sizes: [128, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 127 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<128x64xf16>
    %view4 = ktdp.construct_memory_view %out, sizes: [7, 128], strides: [128, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 127 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x128xf16>
    %core5 = ktdp.get_compute_tile_id : index
    scf.for %iv6 = %core5 to %c2 step %c2 {
      %i7 = arith.muli %iv6, %c64 : index
      %k8 = arith.constant dense<0.000000000e+00> : tensor<7x64xf32>
      %loop10 = scf.for %iv9 = %c0 to %c64 step %c64 iter_args(%acc11 = %k8) -> (tensor<7x64xf32>) {
        %tile12 = ktdp.construct_access_tile %view1[%c0, %iv9] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
        %v13 = ktdp.load %tile12 : !ktdp.access_tile<7x64xindex> -> tensor<7x64xf16>
        %tile14 = ktdp.construct_access_tile %view2[%i7, %iv9] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<128x64xf16> -> !ktdp.access_tile<64x64xindex>
        %v15 = ktdp.load %tile14 : !ktdp.access_tile<64x64xindex> -> tensor<64x64xf16>
        %mm16 = linalg.matmul_transpose_b ins(%v13, %v15 : tensor<7x64xf16>, tensor<64x64xf16>) outs(%acc11 : tensor<7x64xf32>) -> tensor<7x64xf32>
        scf.yield %mm16 : tensor<7x64xf32>
      }
      %k17 = arith.constant dense<0.000000000e+00> : tensor<7x64xf32>
      %loop19 = scf.for %iv18 = %c0 to %c64 step %c64 iter_args(%acc20 = %k17) -> (tensor<7x64xf32>) {
        %tile21 = ktdp.construct_access_tile %view1[%c0, %iv18] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<7x64xf16> -> !ktdp.access_tile<7x64xindex>
        %v22 = ktdp.load %tile21 : !ktdp.access_tile<7x64xindex> -> tensor<7x64xf16>
        %tile23 = ktdp.construct_access_tile %view3[%i7, %iv18] {
          access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 63 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
          access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
        } : memref<128x64xf16> -> !ktdp.access_tile<64x64xindex>
        %v24 = ktdp.load %tile23 : !ktdp.access_tile<64x64xindex> -> tensor<64x64xf16>
        %mm25 = linalg.matmul_transpose_b ins(%v22, %v24 : tensor<7x64xf16>, tensor<64x64xf16>) outs(%acc20 : tensor<7x64xf32>) -> tensor<7x64xf32>
        scf.yield %mm25 : tensor<7x64xf32>
      }
      %k26 = arith.constant dense<1.000000000e+00> : tensor<7x64xf32>
      %e27 = arith.negf %loop10 : tensor<7x64xf32>
      %e28 = math.exp %e27 : tensor<7x64xf32>
      %e29 = arith.addf %k26, %e28 : tensor<7x64xf32>
      %e30 = arith.divf %loop10, %e29 : tensor<7x64xf32>
      %e31 = arith.mulf %e30, %loop19 : tensor<7x64xf32>
      %h32 = arith.truncf %e31 : tensor<7x64xf32> to tensor<7x64xf16>
      %tile33 = ktdp.construct_access_tile %view4[%c0, %i7] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x128xf16> -> !ktdp.access_tile<7x64xindex>
      ktdp.store %h32, %tile33 : tensor<7x64xf16>, !ktdp.access_tile<7x64xindex>
      scf.yield
    }
    return
  }
}
