module {
  func.func @ktir_prefill_tiny_mha_n22_norm(%x: index, %w: index, %out: index) attributes {grid = [7, 1]} {
    %c7 = arith.constant 7 : index
    %c0 = arith.constant 0 : index
    %view1 = ktdp.construct_memory_view %x, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %view2 = ktdp.construct_memory_view %w, sizes: [64], strides: [1] {
      coordinate_set = affine_set<(d0) : (d0 >= 0, -d0 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<64xf16>
    %view3 = ktdp.construct_memory_view %out, sizes: [7, 64], strides: [64, 1] {
      coordinate_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 6 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
      memory_space = #ktdp.spyre_memory_space<HBM>
    } : memref<7x64xf16>
    %core4 = ktdp.get_compute_tile_id : index
    %tile5 = ktdp.construct_access_tile %view2[%c0] {
      access_tile_set = affine_set<(d0) : (d0 >= 0, -d0 + 63 >= 0)>,
      access_tile_order = affine_map<(d0) -> (d0)>
    } : memref<64xf16> -> !ktdp.access_tile<64xindex>
    %v6 = ktdp.load %tile5 : !ktdp.access_tile<64xindex> -> tensor<64xf16>
    %f7 = arith.extf %v6 : tensor<64xf16> to tensor<64xf32>
    %empty8 = tensor.empty() : tensor<1x64xf32>
    %bc9 = linalg.broadcast ins(%f7 : tensor<64xf32>) outs(%empty8 : tensor<1x64xf32>) dimensions = [0]
    scf.for %iv10 = %core4 to %c7 step %c7 {
      %tile11 = ktdp.construct_access_tile %view1[%iv10, %c0] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 0 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<1x64xindex>
      %v12 = ktdp.load %tile11 : !ktdp.access_tile<1x64xindex> -> tensor<1x64xf16>
      %f13 = arith.extf %v12 : tensor<1x64xf16> to tensor<1x64xf32>
      %e14 = arith.mulf %f13, %f13 : tensor<1x64xf32>
      %k15 = arith.constant dense<0.000000000e+00> : tensor<1xf32>
      %red16 = linalg.reduce { arith.addf }
        ins(%e14 : tensor<1x64xf32>)
        outs(%k15 : tensor<1xf32>)
        dimensions = [1]
      %k17 = arith.constant dense<6.400000000e+01> : tensor<1xf32>
      %e18 = arith.divf %red16, %k17 : tensor<1xf32>
      %k19 = arith.constant dense<9.999999747e-06> : tensor<1xf32>
      %e20 = arith.addf %e18, %k19 : tensor<1xf32>
      %e21 = math.sqrt %e20 : tensor<1xf32>
      %k22 = arith.constant dense<1.000000000e+00> : tensor<1xf32>
      %e23 = arith.divf %k22, %e21 : tensor<1xf32>
      %empty24 = tensor.empty() : tensor<1x64xf32>
      %bc25 = linalg.broadcast ins(%e23 : tensor<1xf32>) outs(%empty24 : tensor<1x64xf32>) dimensions = [1]
      %e26 = arith.mulf %f13, %bc25 : tensor<1x64xf32>
      %e27 = arith.mulf %e26, %bc9 : tensor<1x64xf32>
      %h28 = arith.truncf %e27 : tensor<1x64xf32> to tensor<1x64xf16>
      %tile29 = ktdp.construct_access_tile %view3[%iv10, %c0] {
        access_tile_set = affine_set<(d0, d1) : (d0 >= 0, -d0 + 0 >= 0, d1 >= 0, -d1 + 63 >= 0)>,
        access_tile_order = affine_map<(d0, d1) -> (d0, d1)>
      } : memref<7x64xf16> -> !ktdp.access_tile<1x64xindex>
      ktdp.store %h28, %tile29 : tensor<1x64xf16>, !ktdp.access_tile<1x64xindex>
      scf.yield
    }
    return
  }
}
